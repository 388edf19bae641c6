package convert

import (
	"fmt"

	"pdq/quantize"
)

// Rows is the range of rows [R0, R1) of one module.
type Rows struct{ R0, R1 int }

// Slabs returns the row ranges a conversion cuts Linear module m into, in order: the slabs it
// reads, decodes and measures one at a time. A caller that measures slab by slab and merges
// the slabs' figures in this order gets the figures of a conversion's report bit for bit.
func Slabs(m *Module) []Rows {
	rows, _ := rowsOf(m)
	step := max(slabRows(m), 1)
	var out []Rows
	for r0 := 0; r0 < rows; r0 += step {
		out = append(out, Rows{r0, min(rows, r0+step)})
	}
	return out
}

// SourceReader reads rows of a plan's modules from its source checkpoint and decodes them to
// float32 the way a conversion does: the values its quantizers get. It reuses its read buffers,
// so each goroutine needs its own.
type SourceReader struct {
	p          *Plan
	raw, scale []byte
}

// NewSourceReader returns a reader of p's source.
func (p *Plan) NewSourceReader() *SourceReader { return &SourceReader{p: p} }

// Decode reads rows rs of Linear module m (and the rows of its scale companion they use) and
// decodes them into dst, which must hold (rs.R1-rs.R0)·m.Cols values. For an FP8 block source
// rs.R0 must start a block row (every range Slabs returns does). It returns the index in the
// weight tensor of the first value, as error figures count elements.
func (r *SourceReader) Decode(dst []float32, m *Module, rs Rows) (first int64, err error) {
	if !m.Linear || rs.R0 < 0 || rs.R1 > m.Rows || rs.R0 >= rs.R1 || len(dst) != (rs.R1-rs.R0)*m.Cols {
		return 0, fmt.Errorf("convert: %s: rows [%d, %d) into %d values: %w", m.describe(), rs.R0, rs.R1, len(dst), quantize.ErrBadShape)
	}
	if m.Scale != nil && !isChannelScale(m) && rs.R0%FP8BlockSize != 0 {
		return 0, fmt.Errorf("convert: %s: rows from %d, not on an FP8 block row: %w", m.describe(), rs.R0, quantize.ErrBadShape)
	}
	s := &slab{r0: rs.R0, r1: rs.R1}
	s.ranges(m)
	r.raw = grow(r.raw, int(s.wLen))
	s.raw = r.raw
	if err := r.p.Source.ReadTensorAt(m.Weight, s.raw, s.wOff); err != nil {
		return 0, fmt.Errorf("convert: %w", err)
	}
	if m.Scale != nil {
		r.scale = grow(r.scale, int(s.sLen))
		s.scaleRaw = r.scale
		if err := r.p.Source.ReadTensorAt(m.Scale, s.scaleRaw, s.sOff); err != nil {
			return 0, fmt.Errorf("convert: %w", err)
		}
	}
	if err := decodeSource(nil, dst, m, s); err != nil {
		return 0, fmt.Errorf("convert: %s: %w", m.describe(), err)
	}
	return firstElement(m, s), nil
}

// TargetScheme is the scheme of the decode checkpoint's targets (the routed experts by
// default): the one the plan's decode format gives them.
func (p *Plan) TargetScheme() Scheme { return p.Options.targetScheme() }
