package quantize

import (
	"context"
	"fmt"
	"math"

	"pdq/kernels"
)

// FP4Options configures QuantizeFP4. The zero value is not valid: Format must be set.
type FP4Options struct {
	// Format is PackedNVFP4 (groups of 16, e4m3 scales under a global scale) or PackedMXFP4
	// (groups of 32, E8M0 scales).
	Format PackedFormat
	// Method is MethodMSE (also when empty) or MethodRTN, compressed-tensors' rule.
	Method Method
	// Global is the NVFP4 global scale: NVFP4Global of the tensor, or of every tensor sharing
	// it (an expert's gate and up projections). 0 computes it from the values given, which is
	// right only when they are the whole tensor. Ignored for MXFP4.
	Global float32
	// Workers bounds the goroutines used; <= 0 means GOMAXPROCS. Results do not depend on it.
	Workers int
	// FirstRow is the row of its tensor that the first row given is (error messages count from
	// the tensor's start).
	FirstRow int
}

// FP4Result is an FP4 group-quantized slab in compressed-tensors' nvfp4- or
// mxfp4-pack-quantized layout, with the error figures the quantizer saw on the way.
type FP4Result struct {
	Format                PackedFormat
	Rows, Cols, GroupSize int
	// Packed holds the E2M1 codes, U8 [Rows, Cols/2]: element 2i of a row in the low nibble.
	Packed []byte
	// Scales holds one scale code per group, [Rows, Cols/GroupSize]: e4m3 (NVFP4, stored as
	// F8_E4M3) or E8M0 exponents (MXFP4, stored as U8).
	Scales []byte
	// Global is NVFP4's weight_global_scale (F32 [1]); 0 for MXFP4.
	Global float32
	// Clipped counts elements whose ratio to their scale exceeded 6 in magnitude.
	Clipped int64
	// SumSq is Σx², SumSqErr Σ(x-x̂)² of the result and RTNSumSqErr what compressed-tensors'
	// rule would have given: per-group float32 sums added in row-major order in float64.
	SumSq, SumSqErr, RTNSumSqErr float64
}

// SQNR returns the signal-to-quantization-noise ratio of the result in dB (+Inf when exact).
func (r *FP4Result) SQNR() float64 { return sqnr(r.SumSq, r.SumSqErr) }

// RTNSQNR returns the SQNR compressed-tensors' rule would have reached on the same data.
func (r *FP4Result) RTNSQNR() float64 { return sqnr(r.SumSq, r.RTNSumSqErr) }

// GroupScales returns the effective float32 scale of every group (dst reused when large
// enough): S/Global for NVFP4, 2^(c-127) for MXFP4.
func (r *FP4Result) GroupScales(dst []float32) []float32 {
	dst = resize(dst, len(r.Scales))
	if r.Format == PackedNVFP4 {
		kernels.NVFP4Scales(dst, r.Scales, r.Global)
	} else {
		kernels.MXFP4Scales(dst, r.Scales)
	}
	return dst
}

// NVFP4Global returns the NVFP4 global scale of the tensors ws together (kernels.NVFP4GlobalScale
// of their largest |value|): give an expert's gate and up projections to share one, as the
// engines' fused w13 GEMM expects. NaN or ±Inf give ErrNonFinite.
func NVFP4Global(ws ...[]float32) (float32, error) {
	var amax float32
	for _, w := range ws {
		if i := firstNonFinite(w); i >= 0 {
			return 0, fmt.Errorf("quantize: NVFP4 global scale: element %d is %v: %w", i, w[i], ErrNonFinite)
		}
		for _, v := range w {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
	}
	return kernels.NVFP4GlobalScale(amax), nil
}

// QuantizeFP4 quantizes w (rows×cols, row-major) to NVFP4 or MXFP4. It refuses non-finite input
// (ErrNonFinite, naming the first bad element), columns that are not a multiple of the group
// size (ErrBadShape) and invalid options (ErrInvalidOptions). The output is byte-identical for
// every Workers value, and quantizing any range of rows on its own (under the same global scale)
// gives exactly the corresponding rows of the whole.
func QuantizeFP4(ctx context.Context, w []float32, rows, cols int, opt FP4Options) (*FP4Result, error) {
	res := &FP4Result{Format: opt.Format, Rows: rows, Cols: cols}
	search, err := fp4Search(opt.Method)
	if err != nil {
		return nil, err
	}
	switch opt.Format {
	case PackedNVFP4:
		res.GroupSize = kernels.NVFP4GroupSize
	case PackedMXFP4:
		res.GroupSize = kernels.MXFP4GroupSize
	default:
		return nil, fmt.Errorf("quantize: %s is not an FP4 output format: %w", opt.Format, ErrInvalidOptions)
	}
	if rows < 0 || cols <= 0 || cols%res.GroupSize != 0 || len(w) != rows*cols {
		return nil, badShape("%s of %d values as %d×%d (columns a multiple of %d)", opt.Format, len(w), rows, cols, res.GroupSize)
	}
	if opt.Format == PackedNVFP4 {
		res.Global = opt.Global
		if res.Global == 0 {
			if i := firstNonFinite(w); i >= 0 {
				return nil, kernelErr(kernels.CPU{}, &kernels.NonFiniteError{Index: int64(i), Value: w[i]}, opt.FirstRow, cols)
			}
			res.Global, _ = NVFP4Global(w)
		}
		if !(res.Global >= kernels.NVFP4MinGlobal && res.Global <= kernels.NVFP4MaxGlobal) {
			return nil, fmt.Errorf("quantize: NVFP4 global scale %v: %w", res.Global, ErrInvalidOptions)
		}
	}
	ng := rows * cols / res.GroupSize
	res.Packed, res.Scales = make([]byte, rows*cols/2), make([]byte, ng)
	stats := make([]kernels.GroupStats, ng)
	gpr := cols / res.GroupSize
	err = forChunks(ctx, rows, max(chunkElems/cols, 1), opt.Workers, func(r0, r1 int) error {
		out := kernels.FP4Out{
			Packed: res.Packed[r0*cols/2 : r1*cols/2],
			Scales: res.Scales[r0*gpr : r1*gpr],
			Stats:  stats[r0*gpr : r1*gpr],
		}
		var err error
		if opt.Format == PackedNVFP4 {
			err = kernels.QuantizeNVFP4(out, w[r0*cols:r1*cols], r1-r0, cols, res.Global, search)
		} else {
			err = kernels.QuantizeMXFP4(out, w[r0*cols:r1*cols], r1-r0, cols, search)
		}
		return kernelErr(kernels.CPU{}, err, opt.FirstRow+r0, cols)
	})
	if err != nil {
		return nil, err
	}
	var t statSums
	t.add(stats)
	res.SumSq, res.SumSqErr, res.RTNSumSqErr, res.Clipped = t.sumSq, t.sumSqErr, t.rtnErr, t.clipped
	return res, nil
}

// AddFP4 is Add(ref, got, baseIndex) for got the dequantization of q, computed without
// materialising got. ref holds q.Rows×q.Cols values.
func (m *Metrics) AddFP4(ref []float32, q *FP4Result, baseIndex int64) error {
	s, err := kernels.CPU{}.ErrorSumsFP4(ref, q.Packed, q.GroupScales(nil), q.Rows, q.Cols, q.GroupSize, baseIndex)
	if err != nil {
		return fmt.Errorf("quantize: FP4 error sums: %w: %w", ErrBadShape, err)
	}
	m.Merge(metricsOf(s))
	return nil
}

// FP4Bands quantizes a slab to NVFP4 or MXFP4 one band of rows at a time, each band's values
// given while they are in cache, and measures each band as soon as it is quantized: Begin, Add
// for consecutive bands in row order, End (a whole slab is one band). dst holds what
// QuantizeFP4 gives for the whole slab and the error added to m is Metrics.AddFP4's, bit for
// bit, however the slab is cut. It runs on one goroutine (opt.Workers is not used); NVFP4 needs
// opt.Global (the tensor's, or shared by gate and up: NVFP4Global).
type FP4Bands struct {
	dst    *FP4Result
	search kernels.Search
	first  int // opt.FirstRow
	next   int // the slab's row the next band starts at
	acc    kernels.ErrAccumulator
	stats  []kernels.GroupStats
	scales []float32 // the effective group scales of a band, reused
	sums   statSums
}

// Begin starts a slab of rows×cols values quantized into dst (whose storage it reuses).
func (b *FP4Bands) Begin(dst *FP4Result, rows, cols int, opt FP4Options) error {
	search, err := fp4Search(opt.Method)
	if err != nil {
		return err
	}
	g := 0
	switch opt.Format {
	case PackedNVFP4:
		g = kernels.NVFP4GroupSize
		if !(opt.Global >= kernels.NVFP4MinGlobal && opt.Global <= kernels.NVFP4MaxGlobal) {
			return fmt.Errorf("quantize: NVFP4 global scale %v: %w", opt.Global, ErrInvalidOptions)
		}
	case PackedMXFP4:
		g = kernels.MXFP4GroupSize
	default:
		return fmt.Errorf("quantize: %s is not an FP4 output format: %w", opt.Format, ErrInvalidOptions)
	}
	if rows < 0 || cols <= 0 || cols%g != 0 {
		return badShape("%s slab of %d×%d (columns a multiple of %d)", opt.Format, rows, cols, g)
	}
	*dst = FP4Result{Format: opt.Format, Rows: rows, Cols: cols, GroupSize: g,
		Packed: resize(dst.Packed, rows*cols/2), Scales: resize(dst.Scales, rows*cols/g)}
	if opt.Format == PackedNVFP4 {
		dst.Global = opt.Global
	}
	*b = FP4Bands{dst: dst, search: search, first: opt.FirstRow, stats: b.stats, scales: b.scales}
	return nil
}

// Add quantizes and measures the slab's next n rows, whose values w holds.
func (b *FP4Bands) Add(ctx context.Context, w []float32, n int) error {
	res := b.dst
	cols, g := res.Cols, res.GroupSize
	if n < 0 || b.next+n > res.Rows || len(w) != n*cols {
		return badShape("FP4 band of %d elements at row %d, want %d×%d within %d rows", len(w), b.next, n, cols, res.Rows)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r0, gpr := b.next, cols/g
	out := kernels.FP4Out{
		Packed: res.Packed[r0*cols/2 : (r0+n)*cols/2],
		Scales: res.Scales[r0*gpr : (r0+n)*gpr],
	}
	b.stats = resize(b.stats, n*gpr)
	out.Stats = b.stats
	var err error
	if res.Format == PackedNVFP4 {
		err = kernels.QuantizeNVFP4(out, w, n, cols, res.Global, b.search)
	} else {
		err = kernels.QuantizeMXFP4(out, w, n, cols, b.search)
	}
	if err != nil {
		return kernelErr(kernels.CPU{}, err, b.first+r0, cols)
	}
	b.sums.add(out.Stats) // bands in order: the slab's row-major order
	b.scales = resize(b.scales, len(out.Scales))
	if res.Format == PackedNVFP4 {
		kernels.NVFP4Scales(b.scales, out.Scales, res.Global)
	} else {
		kernels.MXFP4Scales(b.scales, out.Scales)
	}
	if err := b.acc.AddFP4(w, out.Packed, b.scales, n, cols, g); err != nil {
		return fmt.Errorf("quantize: FP4 error sums: %w: %w", ErrBadShape, err)
	}
	b.next += n
	return nil
}

// End completes the slab: the result's sums, and its error added to m (element i reported as
// baseIndex+i). Every row must have been added.
func (b *FP4Bands) End(m *Metrics, baseIndex int64) error {
	if b.next != b.dst.Rows {
		return badShape("FP4 slab ended after %d of its %d rows", b.next, b.dst.Rows)
	}
	t := b.sums
	b.dst.SumSq, b.dst.SumSqErr, b.dst.RTNSumSqErr, b.dst.Clipped = t.sumSq, t.sumSqErr, t.rtnErr, t.clipped
	m.Merge(metricsOf(b.acc.Result(baseIndex)))
	return nil
}

// DequantizeFP4 writes into dst (rows×cols) the values of an NVFP4 (global scale global) or
// MXFP4 (global ignored) slab as stored: packed E2M1 codes and one scale code per group. Lengths
// that do not fit give ErrBadShape.
func DequantizeFP4(dst []float32, f PackedFormat, packed, scales []byte, global float32, rows, cols int) error {
	s := make([]float32, len(scales))
	g := kernels.MXFP4GroupSize
	switch f {
	case PackedNVFP4:
		g = kernels.NVFP4GroupSize
		kernels.NVFP4Scales(s, scales, global)
	case PackedMXFP4:
		kernels.MXFP4Scales(s, scales)
	default:
		return fmt.Errorf("quantize: %s is not an FP4 format: %w", f, ErrInvalidOptions)
	}
	if err := kernels.DequantizeFP4(dst, packed, s, rows, cols, g); err != nil {
		return fmt.Errorf("quantize: %w: %w", ErrBadShape, err)
	}
	return nil
}

// fp4Search is the kernels' search for method m ("" is the mse search).
func fp4Search(m Method) (kernels.Search, error) {
	switch m {
	case "", MethodMSE:
		return kernels.SearchMSE, nil
	case MethodRTN:
		return kernels.SearchRTN, nil
	}
	return 0, fmt.Errorf("quantize: FP4 method %q (want %q or %q): %w", m, MethodMSE, MethodRTN, ErrInvalidOptions)
}
