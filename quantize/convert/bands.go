package convert

import (
	"context"
	"fmt"
	"sync/atomic"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/safetensors"
)

// bandElems is the number of values in a band. A slab is decoded and quantized a band of rows
// at a time, each output taking the band while its values are in cache: decoded whole, a
// slab's 16 MiB of float32 would be written to memory by the decoder and read back from it by
// each quantizer and each error sum. 128 Ki float32 are 512 KiB, half the L2 cache of recent
// x86 cores.
const bandElems = 128 << 10

// bandRows returns the rows of a band of module m: whole FP8 block rows, as the FP8 block
// quantizer and decoder take them, about bandElems values.
func bandRows(m *Module) int {
	return FP8BlockSize * max(1, bandElems/(FP8BlockSize*max(m.Cols, 1)))
}

// wholeSlabs turns the band path off, and bandSlabs counts the slabs that took it: tests
// compare the two paths.
var (
	wholeSlabs bool
	bandSlabs  atomic.Int64
)

// inBands reports whether slab s of module m goes through the worker in bands. That takes the
// CPU (a GPU gets whole slabs), a Linear module whose slabs start on block rows, values some
// output needs, and outputs whose quantizers take rows in any cut: the calibrated INT4 searches
// take whole slabs.
func (wk *worker) inBands(m *Module, s *slab) bool {
	if _, cpu := wk.backend.(kernels.CPU); !cpu && wk.backend != nil || wholeSlabs || wk.null || !m.Linear || s.r0%FP8BlockSize != 0 {
		return false
	}
	if m.Scale != nil && len(s.scaleRaw) == 0 {
		return false
	}
	emits := wk.r.emits[s.mi]
	values := false
	for k, kind := range [2]OutputKind{KindPrefill, KindDecode} {
		if !emits[k] {
			continue
		}
		switch sc := m.scheme(kind); sc {
		case SchemeCopy, SchemeFP8Keep:
		case SchemeBF16, SchemeFP8Block:
			values = true
		case SchemeInt4:
			if m.Calib != nil && m.Calib.Method != CalibNone {
				return false
			}
			values = true
		default:
			return false
		}
	}
	return values
}

// bandOut is one output's state while a slab goes through in bands.
type bandOut struct {
	set    *shardSet
	kind   OutputKind
	scheme Scheme
	met    *quantize.Metrics   // the slab's figures for this output
	meas   quantize.Measure    // BF16 and FP8: the error so far
	int4   *quantize.Int4Bands // the worker's: one output of a slab is INT4
	fp8    quantize.FP8Bands
}

// processBands is process for a slab inBands: per band of rows, decode the source, check it,
// and hand the band to each output's quantizer and error sums; each output's tensors are
// written once the slab is done, as the whole-slab path writes them. The bytes and the figures
// are that path's, bit for bit: each quantizer works on rows (or block rows) independently,
// and each output's error sums run over the slab's elements in order, band after band, into
// one accumulator merged once.
func (wk *worker) processBands(ctx context.Context, m *Module, s *slab) error {
	bandSlabs.Add(1)
	r := wk.r
	emits := r.emits[s.mi]
	res := &r.results[s.mi][s.si]
	outs := [2]bandOut{
		{set: r.prefill, kind: KindPrefill, met: &res.prefill},
		{set: r.decode, kind: KindDecode, met: &res.decode},
	}
	rows := s.r1 - s.r0
	for k := range outs {
		o := &outs[k]
		if !emits[k] {
			continue
		}
		o.scheme = m.scheme(o.kind)
		var err error
		switch o.scheme {
		case SchemeCopy, SchemeFP8Keep:
			// The source bytes as they are: no values needed.
			err = wk.emit(ctx, o.set, o.kind, m, s, nil, o.met, nil)
		case SchemeBF16:
			if !bf16Passthrough(m, s) {
				wk.out = grow(wk.out, 2*rows*m.Cols)
			}
		case SchemeFP8Block:
			err = o.fp8.Begin(&wk.fp8, rows, m.Cols, quantize.FP8Options{Workers: 1, Backend: wk.backend, FirstRow: s.r0})
		case SchemeInt4:
			o.int4 = &wk.int4Bands
			err = o.int4.Begin(&wk.int4, rows, m.Cols, wk.int4Options(m, s))
		}
		if err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
	}
	check := !quantizersCheck(m, emits)
	step := bandRows(m)
	for a := s.r0; a < s.r1; a += step {
		band := s.band(m, a, min(a+step, s.r1))
		wk.vals = grow(wk.vals, (band.r1-band.r0)*m.Cols)
		vals := wk.vals
		if err := decodeSource(wk.backend, vals, m, band); err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
		if check {
			if err := quantize.CheckFinite(m.Weight.Name, vals, firstElement(m, band)); err != nil {
				return fmt.Errorf("convert: %s: %w", m.Weight.Shard.Name, err)
			}
		}
		for k := range outs {
			if !emits[k] {
				continue
			}
			if err := wk.bandOut(ctx, &outs[k], m, s, band, vals); err != nil {
				return fmt.Errorf("convert: %s: %w", m.describe(), err)
			}
		}
	}
	base := int64(s.r0) * int64(m.Cols)
	for k := range outs {
		o := &outs[k]
		if emits[k] {
			if err := wk.endBands(o, m, s, res, base); err != nil {
				return err
			}
		}
	}
	return nil
}

// bandOut gives one band of slab s (its values vals) to output o.
func (wk *worker) bandOut(ctx context.Context, o *bandOut, m *Module, s, band *slab, vals []float32) error {
	switch o.scheme {
	case SchemeBF16:
		if bf16Passthrough(m, s) { // the source bytes are the output, the values their own decode
			o.meas.Add(vals, vals)
			return nil
		}
		lo := 2 * (band.r0 - s.r0) * m.Cols
		enc := wk.out[lo : lo+2*len(vals)]
		kernels.EncodeBF16(enc, vals)
		wk.deq = grow(wk.deq, len(vals))
		kernels.DecodeBF16(wk.deq, enc)
		o.meas.Add(vals, wk.deq)
	case SchemeFP8Block:
		q, err := o.fp8.Add(ctx, vals, band.r1-band.r0)
		if err != nil {
			return err
		}
		return o.meas.AddFP8Block(vals, q)
	case SchemeInt4:
		return o.int4.Add(ctx, vals, band.r1-band.r0)
	}
	return nil
}

// endBands writes output o's tensors for slab s and adds up its figures.
func (wk *worker) endBands(o *bandOut, m *Module, s *slab, res *slabResult, base int64) error {
	switch o.scheme {
	case SchemeBF16:
		out := wk.out
		if bf16Passthrough(m, s) {
			out = s.raw
		}
		if err := o.set.write(m.Name+suffixWeight, base*2, out); err != nil {
			return err
		}
		o.meas.MergeInto(o.met, base)
	case SchemeFP8Block:
		if err := wk.writeFP8(o.set, o.kind, m, s, &wk.fp8); err != nil {
			return err
		}
		o.meas.MergeInto(o.met, base)
	case SchemeInt4:
		if err := o.int4.End(o.met, base); err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
		if err := wk.writeInt4(o.set, m, s, &wk.int4); err != nil {
			return err
		}
		o.met.Clipped += wk.int4.Clipped
		res.rtn = rtnMetrics(&wk.int4)
	}
	return nil
}

// bf16Passthrough reports whether slab s of a BF16 output is its source's bytes: a BF16 source's
// finite values (checked) come back bit for bit from a round trip through float32.
func bf16Passthrough(m *Module, s *slab) bool {
	return m.Weight.DType == safetensors.BF16 && m.Scale == nil && int64(len(s.raw)) == int64(s.r1-s.r0)*int64(m.Cols)*2
}

// band returns rows [a, b) of slab s as a slab of its own (its source bytes, and the rows of
// the scale companion they use): what decodeSource and firstElement read. a is on a block row.
func (s *slab) band(m *Module, a, b int) *slab {
	_, rowBytes := rowsOf(m)
	out := &slab{mi: s.mi, si: s.si, r0: a, r1: b}
	if len(s.raw) > 0 {
		lo, hi := int64(a-s.r0)*rowBytes, int64(b-s.r0)*rowBytes
		out.raw, out.wOff, out.wLen = s.raw[lo:hi], s.wOff+lo, hi-lo
	}
	if m.Scale != nil {
		sr0, _ := scaleRange(m, s.r0, s.r1)
		br0, br1 := scaleRange(m, a, b)
		srow := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
		lo, hi := (br0-sr0)*srow, (br1-sr0)*srow
		out.scaleRaw, out.sOff, out.sLen = s.scaleRaw[lo:hi], s.sOff+lo, hi-lo
	}
	return out
}
