package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"pdq/calib"
	"pdq/internal/fsutil"
	"pdq/kernels"
	"pdq/quantize"
	"pdq/safetensors"
)

// slab is a range of rows of one module, the unit of work: read, decode, quantize, write.
type slab struct {
	mi, si     int   // module index, slab index within the module
	r0, r1     int   // rows
	wOff, wLen int64 // the bytes of the weight these rows are, from the tensor's start
	sOff, sLen int64 // the bytes of the scale companion they use (none without one)
	copyOnly   bool  // read for the prefill copy of its shard alone: every output tensor is done
	raw        []byte
	rawBase    []byte // the pooled buffer raw lies in
	scaleRaw   []byte
	rawCRC     uint32 // CRC-32C of raw and of scaleRaw, taken as they were read, for the copier
	scaleCRC   uint32
	cost       int64
	refs       atomic.Int32 // holders (a worker, the copier); the last returns raw and cost
}

// ranges sets the byte ranges of the weight and the scale companion slab s reads.
func (s *slab) ranges(m *Module) {
	_, rowBytes := rowsOf(m)
	if m.Weight.ByteSize() > 0 {
		s.wOff, s.wLen = int64(s.r0)*rowBytes, int64(s.r1-s.r0)*rowBytes
	}
	if m.Scale != nil {
		sr0, sr1 := scaleRange(m, s.r0, s.r1)
		srow := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
		s.sOff, s.sLen = sr0*srow, (sr1-sr0)*srow
	}
}

// slabResult holds the metrics one slab produced, per output.
type slabResult struct {
	prefill, decode quantize.Metrics
	rtn             quantize.Metrics
	// With calibration statistics: Σd·w², Σd·(w−ŵ)² (d = E[x²]), the method used and why it
	// differs from the plan's.
	wRef, wErr float64
	method     string
	note       string
}

// rowsOf returns the number of rows a module is cut into and the bytes per row of its weight.
func rowsOf(m *Module) (rows int, rowBytes int64) {
	if m.Linear {
		return m.Rows, m.Weight.ByteSize() / int64(max(m.Rows, 1))
	}
	if len(m.Weight.Shape) >= 1 && m.Weight.Shape[0] > 0 {
		return int(m.Weight.Shape[0]), m.Weight.ByteSize() / m.Weight.Shape[0]
	}
	return 1, m.Weight.ByteSize()
}

// slabElems is the number of weights per slab: 4 Mi elements (16 MiB as float32) keeps every
// worker busy on GLM-5-sized experts while bounding memory.
const slabElems = 4 << 20

// slabRows returns the rows per slab for module m; Linear modules use multiples of the FP8 block.
func slabRows(m *Module) int {
	rows, _ := rowsOf(m)
	cols := max(m.Cols, 1)
	if !m.Linear {
		if len(m.Weight.Shape) >= 1 && m.Weight.Shape[0] > 0 {
			cols = int(m.Weight.NumElements() / m.Weight.Shape[0])
		}
		return max(1, min(rows, slabElems/max(cols, 1)))
	}
	if m.Calib != nil && m.Calib.Method == CalibGPTQ {
		return max(1, rows) // one factorization per module: GPTQ takes the whole weight
	}
	n := max(FP8BlockSize, (slabElems/cols)/FP8BlockSize*FP8BlockSize)
	return max(1, min(rows, n))
}

// needsValues reports whether a scheme needs the module's float32 values.
func needsValues(s Scheme) bool { return s == SchemeInt4 || s == SchemeFP8Block || s == SchemeBF16 }

// scaleRange returns the rows of the FP8 scale tensor that cover weight rows [r0, r1).
func scaleRange(m *Module, r0, r1 int) (int64, int64) {
	if m.Scale == nil {
		return 0, 0
	}
	if isChannelScale(m) {
		return int64(r0), int64(r1)
	}
	return int64(r0) / FP8BlockSize, ceilDiv(int64(r1), FP8BlockSize)
}

// decodeSource turns a slab's source bytes into float32 values on backend be (nil: the CPU).
func decodeSource(be kernels.Backend, dst []float32, m *Module, s *slab) error {
	w := m.Weight
	if m.Scale == nil {
		return quantize.DecodeDense(dst, s.raw, w.DType)
	}
	sr0, sr1 := scaleRange(m, s.r0, s.r1)
	scale := make([]float32, (sr1-sr0)*int64(scaleCols(m)))
	if err := safetensors.DecodeFloat32(scale, s.scaleRaw, m.Scale.DType); err != nil {
		return fmt.Errorf("tensor %q: %w", m.Scale.Name, err)
	}
	if err := checkScales(m, scale, sr0); err != nil {
		return err
	}
	rows, cols := s.r1-s.r0, m.Cols
	if isChannelScale(m) {
		return quantize.DecodeFP8Channel(dst, s.raw, scale, rows, cols)
	}
	// Block scales: FP8BlockSize x FP8BlockSize blocks (the plan refuses other block sizes); the
	// slab starts on a block row, so its scale rows are whole.
	return quantize.DecodeFP8BlockOn(be, dst, s.raw, scale, []int64{sr1 - sr0, int64(scaleCols(m))}, rows, cols)
}

// checkScales refuses FP8 dequantization scales that are not positive finite numbers: a zero,
// negative or NaN weight_scale_inv would silently zero, flip or poison a whole block. first is
// the scale row of scale[0]; the error names the tensor and the block.
func checkScales(m *Module, scale []float32, first int64) error {
	cols := int64(scaleCols(m))
	for i, v := range scale {
		if !(v > 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("tensor %q: %w: %v at block [%d, %d] (an FP8 scale must be a positive finite number)",
				m.Scale.Name, quantize.ErrBadScale, v, first+int64(i)/cols, int64(i)%cols)
		}
	}
	return nil
}

// isChannelScale reports a per-output-channel FP8 scale ([N, 1] or [N]).
func isChannelScale(m *Module) bool {
	s := m.Scale.Shape
	return len(s) >= 1 && s[0] == int64(m.Rows) && (len(s) == 1 || s[1] == 1) && m.Rows != 1
}

func scaleCols(m *Module) int {
	if len(m.Scale.Shape) == 2 {
		return int(m.Scale.Shape[1])
	}
	return 1
}

// worker holds the reusable state of one worker goroutine.
type worker struct {
	r         *runner
	vals      []float32
	deq       []float32
	out       []byte              // encoded BF16 values of a slab, reused
	int4      quantize.Int4Result // the plain quantizer's result, storage reused slab after slab
	int4Bands quantize.Int4Bands  // the band path's INT4 quantizer, its buffers likewise
	fp8       quantize.FP8Result  // the FP8 block quantizer's, likewise
	fp8Scales []byte              // its scales as bytes
	backend   kernels.Backend
	null      bool // kernels.Null: the pipeline alone, no decoding, checks or error sums
}

// process runs one slab through both outputs.
func (wk *worker) process(ctx context.Context, s *slab) error {
	r := wk.r
	m := r.plan.Modules[s.mi]
	rows := s.r1 - s.r0
	if wk.inBands(m, s) {
		return wk.processBands(ctx, m, s)
	}
	var vals []float32
	emits := r.emits[s.mi]
	if (emits[0] && needsValues(m.Prefill)) || (emits[1] && needsValues(m.Decode)) {
		n := rows * m.Cols
		wk.vals = grow(wk.vals, n)
		vals = wk.vals[:n]
		if wk.null {
			return wk.emitBoth(ctx, m, s, vals)
		}
		if err := decodeSource(wk.backend, vals, m, s); err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
		if !quantizersCheck(m, emits) {
			if err := quantize.CheckFinite(m.Weight.Name, vals, firstElement(m, s)); err != nil {
				return fmt.Errorf("convert: %s: %w", m.Weight.Shard.Name, err)
			}
		}
	}
	if wk.null {
		return wk.emitBoth(ctx, m, s, vals)
	}
	if vals == nil && m.Weight.DType.IsFloat() && len(s.raw) > 0 {
		// Copied tensors are checked too: a NaN or Inf is never written silently. Their bits
		// are read as they are.
		if err := quantize.CheckFiniteRaw(m.Weight.Name, s.raw, m.Weight.DType, firstElement(m, s)); err != nil {
			return fmt.Errorf("convert: %s: %w", m.Weight.Shard.Name, err)
		}
	}
	return wk.emitBoth(ctx, m, s, vals)
}

// firstElement is the index in its tensor of slab s's first weight.
func firstElement(m *Module, s *slab) int64 { return s.wOff * 8 / int64(max(m.Weight.DType.Bits(), 1)) }

// quantizersCheck reports whether every output the slab goes to runs a quantizer that refuses
// NaN and ±Inf itself (the INT4 and FP8 kernels find them through each group's or block's
// absolute maximum, and name the element): the separate pass over the values is then skipped.
func quantizersCheck(m *Module, emits [2]bool) bool {
	selfChecking := func(s Scheme) bool {
		return s == SchemeFP8Block || s == SchemeInt4 && (m.Calib == nil || m.Calib.Method == CalibNone)
	}
	return (!emits[0] || selfChecking(m.Prefill)) && (!emits[1] || selfChecking(m.Decode))
}

// emitBoth writes the slab's share of each output this run writes.
func (wk *worker) emitBoth(ctx context.Context, m *Module, s *slab, vals []float32) error {
	r := wk.r
	emits := r.emits[s.mi]
	res := &r.results[s.mi][s.si]
	if emits[0] {
		if err := wk.emit(ctx, r.prefill, KindPrefill, m, s, vals, &res.prefill, nil); err != nil {
			return err
		}
	}
	if emits[1] {
		if err := wk.emit(ctx, r.decode, KindDecode, m, s, vals, &res.decode, res); err != nil {
			return err
		}
	}
	return nil
}

// emit writes one output's tensors for a slab and measures what was written.
func (wk *worker) emit(ctx context.Context, set *shardSet, kind OutputKind, m *Module, s *slab, vals []float32, met *quantize.Metrics, res *slabResult) error {
	scheme := m.scheme(kind)
	base := int64(s.r0) * int64(m.Cols)
	_, rowBytes := rowsOf(m)
	switch scheme {
	case SchemeCopy:
		if err := set.write(m.Weight.Name, int64(s.r0)*rowBytes, s.raw); err != nil {
			return err
		}
		if m.Scale != nil {
			return wk.writeScaleRows(set, m.Scale.Name, m, s)
		}
		return nil
	case SchemeFP8Keep:
		if err := set.write(m.Name+suffixWeight, int64(s.r0)*rowBytes, s.raw); err != nil {
			return err
		}
		return wk.writeScaleRows(set, m.Name+suffixScale, m, s)
	case SchemeBF16:
		wk.out = grow(wk.out, 2*len(vals))
		out := wk.out
		if wk.null {
			return set.write(m.Name+suffixWeight, base*2, out)
		}
		if m.Weight.DType == safetensors.BF16 && m.Scale == nil && len(s.raw) == len(out) {
			// A BF16 source: its finite values (checked) come back bit for bit from a round trip
			// through float32, so the source bytes are the output and the values their own decode.
			if err := set.write(m.Name+suffixWeight, base*2, s.raw); err != nil {
				return err
			}
			met.Add(vals, vals, base)
			return nil
		}
		kernels.EncodeBF16(out, vals)
		if err := set.write(m.Name+suffixWeight, base*2, out); err != nil {
			return err
		}
		wk.deq = grow(wk.deq, len(vals))
		kernels.DecodeBF16(wk.deq[:len(vals)], out)
		met.Add(vals, wk.deq[:len(vals)], base)
		return nil
	case SchemeFP8Block:
		q, err := wk.quantizeFP8(ctx, set, kind, m, s, vals)
		if err != nil || wk.null {
			return err
		}
		return met.AddFP8Block(vals, q, base)
	case SchemeInt4:
		return wk.emitInt4(ctx, set, m, s, vals, met, res)
	}
	return fmt.Errorf("convert: internal: scheme %q", scheme)
}

func (wk *worker) emitInt4(ctx context.Context, set *shardSet, m *Module, s *slab, vals []float32, met *quantize.Metrics, res *slabResult) error {
	rows := s.r1 - s.r0
	base := int64(s.r0) * int64(m.Cols)
	q, d, measured, err := wk.quantizeInt4(ctx, m, vals, rows, wk.int4Options(m, s), res, met, base)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", m.describe(), err)
	}
	if err := wk.writeInt4(set, m, s, q); err != nil || wk.null {
		return err
	}
	// The error of the bytes written, from the packed levels: no dequantized copy (the plain
	// quantizer measured each chunk as it went).
	if !measured {
		if err := met.AddInt4(vals, q, base); err != nil {
			return err
		}
	}
	met.Clipped += q.Clipped
	if d != nil {
		wk.deq = grow(wk.deq, len(vals))
		deq := wk.deq[:len(vals)]
		if err := quantize.DequantizeInt4On(wk.backend, deq, q.Packed, q.Scales, safetensors.BF16, rows, m.Cols, wk.r.plan.Options.group(m.Cols)); err != nil {
			return err
		}
		res.wRef, res.wErr = quantize.WeightedSums(vals, deq, d)
	}
	res.rtn = rtnMetrics(q)
	return nil
}

// rtnMetrics is what the compressed-tensors rule would have given on a slab, from the kernel's
// per-group sums: no second quantization pass.
func rtnMetrics(q *quantize.Int4Result) quantize.Metrics {
	return quantize.Metrics{N: int64(q.Rows) * int64(q.Cols), SumSqRef: q.SumSq, SumSqErr: q.RTNSumSqErr}
}

// int4Options returns the INT4 quantizer's options for slab s of module m.
func (wk *worker) int4Options(m *Module, s *slab) quantize.Int4Options {
	o := wk.r.plan.Options
	qg := o.group(m.Cols)
	if o.GroupSize == PerChannel {
		qg = 0 // the quantizer's per-channel value; it takes no other group widths
	}
	return quantize.Int4Options{GroupSize: qg, Method: o.Method, SignedScales: o.SignedScales, Workers: 1, Backend: wk.backend,
		FirstRow: s.r0}
}

// writeInt4 writes slab s's INT4 tensors (and the shape tensor, with the first slab).
func (wk *worker) writeInt4(set *shardSet, m *Module, s *slab, q *quantize.Int4Result) error {
	if err := set.write(m.Name+suffixPacked, int64(s.r0)*int64(m.Cols/8)*4, q.Packed); err != nil {
		return err
	}
	if err := set.write(m.Name+suffixScale, int64(s.r0)*int64(m.Cols/wk.r.plan.Options.group(m.Cols))*2, q.Scales); err != nil {
		return err
	}
	if s.r0 != 0 {
		return nil
	}
	shape := make([]byte, 16)
	binary.LittleEndian.PutUint64(shape, uint64(m.Rows))
	binary.LittleEndian.PutUint64(shape[8:], uint64(m.Cols))
	return set.write(m.Name+suffixWeightShape, 0, shape)
}

// quantizeFP8 quantizes slab s of module m (vals) to FP8 blocks and writes them and their
// scales to output kind. The result lives in the worker's storage until its next FP8 slab.
func (wk *worker) quantizeFP8(ctx context.Context, set *shardSet, kind OutputKind, m *Module, s *slab, vals []float32) (*quantize.FP8Result, error) {
	q := &wk.fp8
	opt := quantize.FP8Options{Workers: 1, Backend: wk.backend, FirstRow: s.r0}
	if err := quantize.QuantizeFP8BlockInto(ctx, q, vals, s.r1-s.r0, m.Cols, opt); err != nil {
		return nil, fmt.Errorf("convert: %s: %w", m.describe(), err)
	}
	return q, wk.writeFP8(set, kind, m, s, q)
}

// writeFP8 writes slab s's FP8 codes and scales to output kind.
func (wk *worker) writeFP8(set *shardSet, kind OutputKind, m *Module, s *slab, q *quantize.FP8Result) error {
	if err := set.write(m.Name+suffixWeight, int64(s.r0)*int64(m.Cols), q.Data); err != nil {
		return err
	}
	wk.fp8Scales = grow(wk.fp8Scales, 4*len(q.ScaleInv))
	sb := wk.fp8Scales
	for i, v := range q.ScaleInv {
		binary.LittleEndian.PutUint32(sb[4*i:], math.Float32bits(v))
	}
	sc := ceilDiv(int64(m.Cols), FP8BlockSize)
	return set.write(m.fp8ScaleName(kind), int64(s.r0/FP8BlockSize)*sc*4, sb)
}

// quantizeInt4 quantizes one slab of an INT4 module: plain search, or with the module's
// calibration statistics the weighted search or GPTQ. It returns the column weights d used
// (nil without statistics), and whether it already added the result's error to met (the plain
// search measures each chunk while it is in cache). A Hessian that cannot be factorized even
// with more dampening makes the module fall back to the weighted search, noted in the report.
func (wk *worker) quantizeInt4(ctx context.Context, m *Module, vals []float32, rows int, opt quantize.Int4Options, res *slabResult,
	met *quantize.Metrics, base int64) (*quantize.Int4Result, []float32, bool, error) {
	mc := m.Calib
	if mc == nil || mc.Method == CalibNone {
		// Written and measured before the worker's next slab: the storage is reused.
		if wk.null {
			return &wk.int4, nil, true, quantize.QuantizeInt4Into(ctx, &wk.int4, vals, rows, m.Cols, opt)
		}
		if err := quantize.QuantizeInt4Measured(ctx, &wk.int4, vals, rows, m.Cols, opt, met, base); err != nil {
			return nil, nil, false, err
		}
		return &wk.int4, nil, true, nil
	}
	st := wk.r.plan.Options.Calib
	d, err := st.SqMean(mc.Entry)
	if err != nil {
		return nil, nil, false, err
	}
	res.method = mc.Method
	if mc.Method == CalibGPTQ {
		f, err := wk.factor(ctx, st, mc.Entry)
		defer wk.r.factors.done(mc.Entry)
		if err == nil {
			q, err := calib.QuantizeGPTQ(ctx, vals, rows, m.Cols, opt, d, f)
			if err == nil && f.Tries > 1 {
				res.note = fmt.Sprintf("Cholesky failed %d time(s); dampening raised to %g", f.Tries-1, f.Damp)
			}
			return q, d, false, err
		}
		if !errors.Is(err, calib.ErrIllConditioned) && !errors.Is(err, calib.ErrNoSignal) {
			return nil, nil, false, err
		}
		res.method, res.note = CalibWeighted, "gptq failed, weighted search used: "+err.Error()
	}
	q, err := quantize.QuantizeInt4Weighted(ctx, vals, rows, m.Cols, opt, d)
	return q, d, false, err
}

// factor returns the GPTQ factor of a module's statistics entry, computed once for all the
// modules sharing the entry (gate and up of one expert) and dropped after the last of them. A
// bad Hessian (calib.ErrFormat) is an error of the run; ErrIllConditioned and ErrNoSignal lead
// to the weighted fallback.
func (wk *worker) factor(ctx context.Context, st *calib.Stats, e *calib.Entry) (*calib.Factor, error) {
	return wk.r.factors.get(e, func() (*calib.Factor, error) {
		h, err := st.Hessian(e)
		if err != nil {
			return nil, err
		}
		return calib.Factorize(ctx, h, e.K, wk.gptqOptions())
	})
}

// writeScaleRows copies the slab's rows of an FP8 scale tensor to output tensor name.
func (wk *worker) writeScaleRows(set *shardSet, name string, m *Module, s *slab) error {
	if len(s.scaleRaw) == 0 {
		return nil // a later slab of the same scale block row: written once by the first
	}
	sr0, _ := scaleRange(m, s.r0, s.r1)
	rowBytes := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
	return set.write(name, sr0*rowBytes, s.scaleRaw)
}

// grow returns b with length n, reusing its storage when large enough (the contents are
// whatever was there: every caller overwrites them).
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// rawBufs keeps a run's slab read buffers for reuse: a run reads hundreds of gigabytes through
// a few dozen buffers instead of allocating (and faulting in, clearing and collecting) each one.
// Unlike a sync.Pool it keeps them across garbage collections and hands out the best fit of all
// it holds; it holds at most maxIdleRaw of them and maxIdleRawBytes, so memory does not pile up
// when slab sizes change (what is in flight is bounded by the run's memory budget; this is the
// fixed overhead beside it).
type rawBufs struct {
	mu    sync.Mutex
	idle  [][]byte
	bytes int // the capacity of idle
}

// maxIdleRaw and maxIdleRawBytes bound the buffers a rawBufs keeps unused: the reader, the
// workers' queue and the copier's hold about a dozen slabs at once.
const (
	maxIdleRaw      = 16
	maxIdleRawBytes = 64 << 20
)

// get returns a buffer of n bytes whose address is congruent to off modulo the direct I/O
// alignment (fsutil.AlignedLike), and the pooled buffer it lies in.
func (p *rawBufs) get(n, off int64) (buf, base []byte) {
	want := int(n) + fsutil.DirectAlign
	p.mu.Lock()
	best := -1
	for i, b := range p.idle {
		if cap(b) >= want && (best < 0 || cap(b) < cap(p.idle[best])) {
			best = i
		}
	}
	if best >= 0 {
		base = p.idle[best][:want]
		p.bytes -= cap(base)
		p.idle = slices.Delete(p.idle, best, best+1)
	}
	p.mu.Unlock()
	if base == nil {
		base = make([]byte, want)
	}
	return fsutil.AlignedLike(base, off, int(n)), base
}

// put returns a buffer no longer referenced; beyond the bounds the smallest idle buffers are
// dropped.
func (p *rawBufs) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, b)
	p.bytes += cap(b)
	for len(p.idle) > maxIdleRaw || p.bytes > maxIdleRawBytes && len(p.idle) > 1 {
		small := 0
		for i, x := range p.idle {
			if cap(x) < cap(p.idle[small]) {
				small = i
			}
		}
		p.bytes -= cap(p.idle[small])
		p.idle = slices.Delete(p.idle, small, small+1)
	}
}
