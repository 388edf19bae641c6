package convert

import (
	"context"
	"fmt"

	"pdq/quantize"
	"pdq/safetensors"
)

// passedEncoding writes an already-quantized source module's tensors through unchanged: the
// decode output asked the source's own format with the same parameters (passesThrough). Its
// report row measures the decoded source against itself (no error) so that the report lists
// every module that passed through; verify checks the bytes against the source's and decodes
// them again.
type passedEncoding struct{}

func init() { register(passedEncoding{}) }

func (passedEncoding) Scheme() Scheme { return SchemePassed }

func (passedEncoding) Bind(m *Module, kind OutputKind, _ *Options) Bound {
	if m.Packed == nil {
		panic("convert: internal: module " + m.Name + " passes through without an already-quantized source")
	}
	return &passedBound{m: m, kind: kind}
}

// ctGroup: a module passes through only in the format the targets are asked in, with the same
// parameters, so it belongs to the targets' group.
func (passedEncoding) ctGroup(o *Options) (key, format string, group map[string]any) {
	return encodings[o.targetScheme()].(ctGrouped).ctGroup(o)
}

// passedBound is a pass-through of one already-quantized module.
type passedBound struct {
	m    *Module
	kind OutputKind
}

func (b *passedBound) Scheme() Scheme { return SchemePassed }

// Specs: the source's tensors under their own names, packed codes first.
func (b *passedBound) Specs() []safetensors.TensorSpec {
	var specs []safetensors.TensorSpec
	for _, t := range b.m.Packed.tensors() {
		specs = append(specs, safetensors.TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return specs
}

func (b *passedBound) Copied() []string {
	var names []string
	for _, t := range b.m.Packed.tensors() {
		names = append(names, t.Name)
	}
	return names
}

func (b *passedBound) ValueTensor() string { return b.m.Packed.packed.Name }
func (b *passedBound) Values() bool        { return true } // decoded: a malformed source is refused, not passed on
func (b *passedBound) ChecksFinite() bool  { return true } // the decoder refuses non-finite scales and values
func (b *passedBound) Bands() bool         { return true }

func (b *passedBound) Cost() float64 {
	var n int64
	for _, t := range b.m.Packed.tensors() {
		n += t.ByteSize()
	}
	return float64(n) * nsCopyByte * 1e-9
}

// Dequantize decodes the output's tensors with the source's layout.
func (b *passedBound) Dequantize(dst []float32, read TensorReader) (string, error) {
	ps := b.m.Packed
	s := &slab{r0: 0, r1: b.m.Rows}
	var err error
	if s.raw, _, err = read(ps.packed.Name); err != nil {
		return "", err
	}
	if s.packed, err = readPackedRows(func(t *safetensors.Tensor, dst []byte, off int64) error {
		data, _, err := read(t.Name)
		if err != nil {
			return err
		}
		if off+int64(len(dst)) > int64(len(data)) {
			return fmt.Errorf("tensor %q: %d bytes, want at least %d: %w", t.Name, len(data), off+int64(len(dst)), quantize.ErrBadShape)
		}
		copy(dst, data[off:])
		return nil
	}, ps, 0, b.m.Rows); err != nil {
		return "", err
	}
	if err := decodePacked(dst, b.m, s); err != nil {
		return fmt.Sprintf("module %s: %v", b.m.Name, err), nil
	}
	return "", nil
}

func (b *passedBound) newEncoder() encoder { return &passedEncoder{} }

// passedEncoder writes a slab's source bytes (the packed codes and the companions' rows) and
// measures the decoded values against themselves.
type passedEncoder struct {
	j    *job
	meas quantize.Measure
}

func (e *passedEncoder) begin(_ context.Context, j *job) error {
	e.j, e.meas = j, quantize.Measure{}
	return nil
}

func (e *passedEncoder) add(_ context.Context, _ *slab, vals []float32) error {
	if !e.j.wk.null {
		e.meas.Add(vals, vals)
	}
	return nil
}

func (e *passedEncoder) end(context.Context) error {
	j := e.j
	m, s, ps := j.m, j.s, j.m.Packed
	_, rowBytes := rowsOf(m)
	if err := j.set.write(ps.packed.Name, int64(s.r0)*rowBytes, s.raw); err != nil {
		return err
	}
	raw := s.packed
	if raw == nil {
		return fmt.Errorf("convert: %s: internal: slab without its companions", m.describe())
	}
	if err := j.set.write(ps.scale.Name, int64(s.r0)*ps.scaleRowBytes(), raw.scales); err != nil {
		return err
	}
	if ps.zero != nil {
		z0, _, zrow := ps.zeroRows(s.r0, s.r1)
		if err := j.set.write(ps.zero.Name, z0*zrow, raw.zero); err != nil {
			return err
		}
	}
	if s.r0 == 0 {
		for _, x := range []struct {
			t *safetensors.Tensor
			b []byte
		}{{ps.shape, raw.shape}, {ps.global, raw.global}} {
			if x.t != nil {
				if err := j.set.write(x.t.Name, 0, x.b); err != nil {
					return err
				}
			}
		}
	}
	if !j.wk.null {
		e.meas.MergeInto(&j.out.met, j.base())
	}
	return nil
}
