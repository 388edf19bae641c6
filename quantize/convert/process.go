package convert

import (
	"context"
	"fmt"
	"sync/atomic"

	"pdq/kernels"
	"pdq/quantize"
)

// bandElems is the number of values in a band. A slab is decoded and encoded a band of rows
// at a time, each output taking the band while its values are in cache: decoded whole, a
// slab's 16 MiB of float32 would be written to memory by the decoder and read back from it by
// each encoder and each error sum. 128 Ki float32 are 512 KiB, half the L2 cache of recent
// x86 cores.
const bandElems = 128 << 10

// bandRows returns the rows of a band of module m: whole FP8 block rows, as the FP8 block
// quantizer and decoder take them, about bandElems values.
func bandRows(m *Module) int {
	return FP8BlockSize * max(1, bandElems/(FP8BlockSize*max(m.Cols, 1)))
}

// wholeSlabs makes every slab one band, and bandSlabs counts the slabs cut into more than one
// band: tests compare the two cuts.
var (
	wholeSlabs bool
	bandSlabs  atomic.Int64
)

// worker holds the reusable state of one worker goroutine.
type worker struct {
	r       *runner
	vals    []float32
	deq     []float32
	encs    []map[Scheme]encoder // per output: one encoder per scheme, storage reused
	jobs    []job
	backend kernels.Backend
	null    bool // kernels.Null: the pipeline alone, no decoding, checks or error sums
}

// encoder returns the worker's encoder of bound b's scheme for output k.
func (wk *worker) encoder(k int, b Bound) encoder {
	if wk.encs == nil {
		wk.encs = make([]map[Scheme]encoder, len(outputKinds))
	}
	if wk.encs[k] == nil {
		wk.encs[k] = map[Scheme]encoder{}
	}
	e := wk.encs[k][b.Scheme()]
	if e == nil {
		e = b.newEncoder()
		wk.encs[k][b.Scheme()] = e
	}
	return e
}

// process runs one slab through every output this run writes of its module: per band of rows,
// decode the source, check it, and hand the band to each output's encoder. Each encoder works
// on rows (or block rows) independently and measures its output's error over the slab's
// elements in order, band after band, so the bytes and the figures do not depend on the cut.
func (wk *worker) process(ctx context.Context, s *slab) error {
	r := wk.r
	m := r.plan.Modules[s.mi]
	res := &r.results[s.mi][s.si]
	jobs := wk.jobs[:0]
	values, checked, bands := false, true, true
	for k, emit := range r.emits[s.mi] {
		if !emit {
			continue
		}
		b := r.plan.bound(m, outputKinds[k])
		jobs = append(jobs, job{b: b, m: m, set: r.outs[k], s: s, wk: wk, out: &res.outs[k], enc: wk.encoder(k, b)})
		values = values || b.Values()
		checked = checked && b.ChecksFinite()
		bands = bands && b.Bands()
	}
	wk.jobs = jobs
	if !values && !wk.null && m.Weight.DType.IsFloat() && len(s.raw) > 0 {
		// Copied tensors are checked too: a NaN or Inf is never written silently. Their bits
		// are read as they are.
		if err := quantize.CheckFiniteRaw(m.Weight.Name, s.raw, m.Weight.DType, firstElement(m, s)); err != nil {
			return fmt.Errorf("convert: %s: %w", m.Weight.Shard.Name, err)
		}
	}
	for i := range jobs {
		if err := jobs[i].enc.begin(ctx, &jobs[i]); err != nil {
			return err
		}
	}
	if values {
		step := s.r1 - s.r0
		if bands && wk.inBands(m, s) {
			bandSlabs.Add(1)
			step = bandRows(m)
		}
		for a := s.r0; a < s.r1 || a == s.r0; a += max(step, 1) {
			band := s
			if step < s.r1-s.r0 {
				band = s.band(m, a, min(a+step, s.r1))
			}
			if err := wk.encodeBand(ctx, m, band, jobs, checked); err != nil {
				return err
			}
		}
	}
	for i := range jobs {
		if err := jobs[i].enc.end(ctx); err != nil {
			return err
		}
	}
	return nil
}

// encodeBand decodes one band of a slab, checks its values unless every encoder does, and hands
// them to each encoder.
func (wk *worker) encodeBand(ctx context.Context, m *Module, band *slab, jobs []job, checked bool) error {
	n := (band.r1 - band.r0) * m.Cols
	wk.vals = grow(wk.vals, n)
	vals := wk.vals[:n]
	if !wk.null {
		if err := decodeSource(wk.backend, vals, m, band); err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
		if !checked {
			if err := quantize.CheckFinite(m.Weight.Name, vals, firstElement(m, band)); err != nil {
				return fmt.Errorf("convert: %s: %w", m.Weight.Shard.Name, err)
			}
		}
	}
	for i := range jobs {
		if err := jobs[i].enc.add(ctx, band, vals); err != nil {
			return err
		}
	}
	return nil
}

// firstElement is the index in its tensor of slab s's first weight.
func firstElement(m *Module, s *slab) int64 { return s.wOff * 8 / int64(max(m.Weight.DType.Bits(), 1)) }

// inBands reports whether slab s of module m may be cut into bands: on the CPU (a GPU takes
// whole slabs), for a Linear module whose slab starts on a block row and holds its scale rows.
func (wk *worker) inBands(m *Module, s *slab) bool {
	if _, cpu := wk.backend.(kernels.CPU); !cpu && wk.backend != nil || wholeSlabs || wk.null || !m.Linear || s.r0%FP8BlockSize != 0 {
		return false
	}
	return m.Scale == nil || len(s.scaleRaw) > 0
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
	if s.packed != nil {
		out.packed = s.packed.band(m.Packed, s.r0, a, b)
	}
	return out
}
