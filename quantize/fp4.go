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
	search := kernels.SearchMSE
	switch opt.Method {
	case "", MethodMSE:
	case MethodRTN:
		search = kernels.SearchRTN
	default:
		return nil, fmt.Errorf("quantize: FP4 method %q (want %q or %q): %w", opt.Method, MethodMSE, MethodRTN, ErrInvalidOptions)
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
	err := forChunks(ctx, rows, max(chunkElems/cols, 1), opt.Workers, func(r0, r1 int) error {
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
