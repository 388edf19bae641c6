package quantize

import (
	"context"
	"errors"
	"fmt"
	"math"

	"pdq/kernels"
	"pdq/safetensors"
)

// Int4Result is an INT4 group-quantized slab in the compressed-tensors pack-quantized layout,
// with the error figures the quantizer saw on the way.
type Int4Result struct {
	Rows, Cols, GroupSize int
	// Packed holds I32 little-endian words, shape [Rows, Cols/8]: element j of a row is the
	// nibble q+8 at bit 4·(j%8) of word j/8.
	Packed []byte
	// Scales holds BF16 little-endian scales, shape [Rows, Cols/GroupSize].
	Scales []byte
	// Clipped counts elements whose nearest level lay outside [-8, 7].
	Clipped int64
	// SumSq is Σx², SumSqErr Σ(x-x̂)² of the result and RTNSumSqErr what the reference rule
	// (absmax/7.5) would have given: per-group float32 sums added in row-major order in float64.
	SumSq, SumSqErr, RTNSumSqErr float64

	stats []kernels.GroupStats // per-group sums (the band path: one chunk's at a time), storage reused
}

// SQNR returns the signal-to-quantization-noise ratio of the result in dB (+Inf when exact).
func (r *Int4Result) SQNR() float64 { return sqnr(r.SumSq, r.SumSqErr) }

// RTNSQNR returns the SQNR the reference rule absmax/7.5 would have reached on the same data.
func (r *Int4Result) RTNSQNR() float64 { return sqnr(r.SumSq, r.RTNSumSqErr) }

// QuantizeInt4 quantizes w (rows×cols, row-major) to symmetric INT4 with BF16 group scales.
// It refuses non-finite input (ErrNonFinite, naming the first bad element) and shapes the
// options cannot handle. The output is byte-identical for every Workers value, and quantizing
// any range of rows on its own gives exactly the corresponding rows of the whole.
func QuantizeInt4(ctx context.Context, w []float32, rows, cols int, opt Int4Options) (*Int4Result, error) {
	res := new(Int4Result)
	if err := QuantizeInt4Into(ctx, res, w, rows, cols, opt); err != nil {
		return nil, err
	}
	res.stats = nil // kept only by callers that reuse the result
	return res, nil
}

// QuantizeInt4Into is QuantizeInt4 writing its result into dst, whose slices' storage it reuses
// when large enough: a caller quantizing slab after slab allocates nothing after the first.
// On error dst's contents are unspecified.
func QuantizeInt4Into(ctx context.Context, dst *Int4Result, w []float32, rows, cols int, opt Int4Options) error {
	return quantizeInt4Into(ctx, dst, w, rows, cols, opt)
}

// Int4Bands quantizes a slab with the plain search one band of rows at a time, each band's
// values given when the caller has them (decoded just before, still in cache), and measures
// each band as soon as it is quantized: Begin, Add for consecutive bands in row order, End (a
// whole slab is one band). dst is QuantizeInt4Into's over the whole slab and the error added to
// m is Metrics.AddInt4's (with Int4Options.Weights, Metrics.Add's against the engine's weights),
// bit for bit, however the slab is cut. It runs on opt.Backend with one
// goroutine (opt.Workers is not used); the calibrated quantizers take whole slabs instead.
type Int4Bands struct {
	dst     *Int4Result
	p       kernels.Int4Params
	be      kernels.Backend
	first   int // opt.FirstRow
	next    int // the slab's row the next band starts at
	acc     kernels.ErrAccumulator
	scales  []float32      // the BF16 scales of a chunk as float32, reused
	deq     []float32      // Int4Options.Weights: a chunk's weights as the engine computes them, reused
	weights *EngineWeights // Int4Options.Weights
	sums    statSums       // the slab's group sums so far, in row-major order
}

// Begin starts a slab of rows×cols values quantized into dst (whose storage it reuses).
func (b *Int4Bands) Begin(dst *Int4Result, rows, cols int, opt Int4Options) error {
	if err := opt.Validate(cols); err != nil {
		return err
	}
	if rows < 0 {
		return badShape("INT4 source of %d rows", rows)
	}
	p, err := sizeInt4(dst, rows, cols, opt, false)
	if err != nil {
		return err
	}
	*b = Int4Bands{dst: dst, p: p, be: opt.backend(), first: opt.FirstRow, scales: b.scales, deq: b.deq, weights: opt.Weights}
	return nil
}

// Add quantizes and measures the slab's next n rows, whose values w holds.
func (b *Int4Bands) Add(ctx context.Context, w []float32, n int) error {
	res := b.dst
	cols := res.Cols
	if n < 0 || b.next+n > res.Rows || len(w) != n*cols {
		return badShape("INT4 band of %d elements at row %d, want %d×%d within %d rows", len(w), b.next, n, cols, res.Rows)
	}
	r0 := b.next
	err := forChunks(ctx, n, slabStep(b.be, chunkElems/max(cols, 1), n), 1, func(c0, c1 int) error {
		res.stats = resize(res.stats, (c1-c0)*cols/res.GroupSize) // one chunk's: added to b.sums at once
		out := res.rowsOut(r0+c0, r0+c1, res.stats)
		src := w[c0*cols : c1*cols]
		if err := b.be.QuantizeInt4(out, src, c1-c0, cols, &b.p); err != nil {
			return kernelErr(b.be, err, b.first+r0+c0, cols)
		}
		b.sums.add(out.Stats) // one goroutine, chunks in order: the slab's row-major order
		if b.weights != nil {
			b.deq = resize(b.deq, len(src))
			if err := b.weights.Dequantize(b.deq, out.Packed, out.Scales, c1-c0, cols); err != nil {
				return err
			}
			b.acc.Add(src, b.deq)
			return nil
		}
		b.scales = resize(b.scales, len(out.Scales)/2)
		kernels.DecodeBF16(b.scales, out.Scales)
		if err := b.acc.AddInt4(src, out.Packed, b.scales, c1-c0, cols, b.p.GroupSize); err != nil {
			return fmt.Errorf("quantize: INT4 error sums: %w: %w", ErrBadShape, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.next += n
	return nil
}

// End completes the slab: the result's sums, and its error added to m (element i reported as
// baseIndex+i). Every row must have been added.
func (b *Int4Bands) End(m *Metrics, baseIndex int64) error {
	if b.next != b.dst.Rows {
		return badShape("INT4 slab ended after %d of its %d rows", b.next, b.dst.Rows)
	}
	b.sums.setIn(b.dst)
	m.Merge(metricsOf(b.acc.Result(baseIndex)))
	return nil
}

// quantizeInt4Into runs the backend's quantizer chunk by chunk over opt.Workers.
func quantizeInt4Into(ctx context.Context, dst *Int4Result, w []float32, rows, cols int, opt Int4Options) error {
	be := opt.backend()
	return quantizeInt4Rows(ctx, dst, w, rows, cols, opt, nil, be, slabStep(be, chunkElems/max(cols, 1), rows),
		func(out kernels.Int4Out, src []float32, n int, p *kernels.Int4Params) error {
			return be.QuantizeInt4(out, src, n, cols, p)
		})
}

// quantizeInt4Rows is the frame of the INT4 quantizers: it checks options and shapes (then
// check, when given), sizes the result res (reusing its storage), runs quant on chunks of step
// rows over the workers and adds up the group statistics.
func quantizeInt4Rows(ctx context.Context, res *Int4Result, w []float32, rows, cols int, opt Int4Options, check func() error,
	be kernels.Backend, step int, quant func(out kernels.Int4Out, src []float32, n int, p *kernels.Int4Params) error) error {
	if err := opt.Validate(cols); err != nil {
		return err
	}
	if rows < 0 || len(w) != rows*cols {
		return badShape("INT4 source has %d elements, want %d×%d", len(w), rows, cols)
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	p, err := sizeInt4(res, rows, cols, opt, true)
	if err != nil {
		return err
	}
	err = forChunks(ctx, rows, step, opt.Workers, func(r0, r1 int) error {
		ng := cols / res.GroupSize
		return kernelErr(be, quant(res.rowsOut(r0, r1, res.stats[r0*ng:r1*ng]), w[r0*cols:r1*cols], r1-r0, &p), opt.FirstRow+r0, cols)
	})
	if err != nil {
		return err
	}
	res.sumStats()
	return nil
}

// sizeInt4 sizes res for rows×cols values under opt (reusing its storage), its per-group sums
// too when stats is set, and returns the kernel parameters.
func sizeInt4(res *Int4Result, rows, cols int, opt Int4Options, stats bool) (kernels.Int4Params, error) {
	p, err := opt.params(cols)
	if err != nil {
		return p, fmt.Errorf("quantize: %w: %w", ErrInvalidOptions, err)
	}
	ng := cols / p.GroupSize
	st := res.stats[:0] // storage only, unless stats
	if stats {
		st = resize(st, rows*ng)
	}
	*res = Int4Result{
		Rows: rows, Cols: cols, GroupSize: p.GroupSize,
		Packed: resize(res.Packed, rows*cols/2),
		Scales: resize(res.Scales, 2*rows*ng),
		stats:  st,
	}
	return p, nil
}

// rowsOut returns the kernel's view of rows [r0, r1) of res, with the group sums going to stats.
func (res *Int4Result) rowsOut(r0, r1 int, stats []kernels.GroupStats) kernels.Int4Out {
	cols, ng := res.Cols, res.Cols/res.GroupSize
	return kernels.Int4Out{
		Packed: res.Packed[r0*cols/2 : r1*cols/2],
		Scales: res.Scales[2*r0*ng : 2*r1*ng],
		Stats:  stats,
	}
}

// sumStats adds up the per-group sums in row-major order.
func (res *Int4Result) sumStats() {
	var t statSums
	t.add(res.stats)
	t.setIn(res)
}

// statSums adds up per-group sums, group after group in the order given, in float64: the
// figures of an Int4Result.
type statSums struct {
	sumSq, sumSqErr, rtnErr float64
	clipped                 int64
}

// add adds the groups of stats in order.
func (t *statSums) add(stats []kernels.GroupStats) {
	// In locals, not through t: the sums stay in registers instead of making each addition
	// wait for the store of the one before (the same additions in the same order).
	sumSq, sumSqErr, rtnErr, clipped := t.sumSq, t.sumSqErr, t.rtnErr, t.clipped
	for _, st := range stats {
		sumSq += float64(st.SumSq)
		sumSqErr += float64(st.Err)
		rtnErr += float64(st.RTNErr)
		clipped += int64(st.Clipped)
	}
	t.sumSq, t.sumSqErr, t.rtnErr, t.clipped = sumSq, sumSqErr, rtnErr, clipped
}

// setIn sets res's figures to the sums.
func (t *statSums) setIn(res *Int4Result) {
	res.SumSq, res.SumSqErr, res.RTNSumSqErr, res.Clipped = t.sumSq, t.sumSqErr, t.rtnErr, t.clipped
}

// resize returns b with length n, reusing its storage when large enough. Every kernel writes
// each element of its outputs, so reused storage needs no clearing.
func resize[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// kernelErr turns a backend error for a slab starting at row r0 into a quantize error.
func kernelErr(be kernels.Backend, err error, r0, cols int) error {
	if err == nil {
		return nil
	}
	var nf *kernels.NonFiniteError
	if errors.As(err, &nf) {
		i := int64(r0)*int64(cols) + nf.Index
		return fmt.Errorf("quantize: element %d (row %d, column %d) is %v: %w", i, i/int64(cols), i%int64(cols), nf.Value, ErrNonFinite)
	}
	if errors.Is(err, kernels.ErrShape) {
		return fmt.Errorf("quantize: backend %s: %w: %w", be.Name(), ErrBadShape, err)
	}
	return fmt.Errorf("quantize: backend %s: %w", be.Name(), err)
}

// DequantizeInt4 expands packed INT4 levels into dst (rows×cols): dst = (nibble-8)·scale.
// scales holds [rows, cols/groupSize] values of scaleDType (BF16, F16 or F32); groupSize 0
// means one group per row.
func DequantizeInt4(dst []float32, packed, scales []byte, scaleDType safetensors.DType, rows, cols, groupSize int) error {
	return DequantizeInt4On(kernels.CPU{}, dst, packed, scales, scaleDType, rows, cols, groupSize)
}

func sqnr(sig, noise float64) float64 {
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}

// DequantizeInt4On is DequantizeInt4 on backend be (nil: kernels.CPU): the scales are decoded
// and checked on the host, the expansion runs on the backend.
func DequantizeInt4On(be kernels.Backend, dst []float32, packed, scales []byte, scaleDType safetensors.DType, rows, cols, groupSize int) error {
	be = backendOr(be)
	g := GroupWidth(groupSize, cols)
	if rows < 0 || cols <= 0 || g <= 0 || g%8 != 0 || cols%g != 0 {
		return badShape("INT4 dequantize: group %d does not divide %d columns in multiples of 8", groupSize, cols)
	}
	if len(dst) != rows*cols || len(packed) != rows*cols/2 {
		return badShape("INT4 dequantize %d×%d: dst has %d elements, packed %d bytes", rows, cols, len(dst), len(packed))
	}
	if scaleDType != safetensors.BF16 && scaleDType != safetensors.F16 && scaleDType != safetensors.F32 {
		return fmt.Errorf("quantize: INT4 scales of dtype %s: %w", scaleDType, safetensors.ErrUnsupportedDType)
	}
	n := rows * cols / g
	if len(scales)*8 != n*scaleDType.Bits() {
		return badShape("INT4 dequantize: %d scale bytes for %d %s scales", len(scales), n, scaleDType)
	}
	s := make([]float32, n)
	if err := safetensors.DecodeFloat32(s, scales, scaleDType); err != nil {
		return fmt.Errorf("quantize: INT4 scales: %w", err)
	}
	if i := firstNonFinite(s); i >= 0 {
		return fmt.Errorf("quantize: INT4 scale %d is %v: %w", i, s[i], ErrNonFinite)
	}
	return kernelErr(be, be.DequantizeInt4(dst, packed, s, rows, cols, g), 0, cols)
}
