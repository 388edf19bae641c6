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

	stats []kernels.GroupStats // per-group sums, kept for reuse by QuantizeInt4Into
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
	return quantizeInt4Into(ctx, dst, w, rows, cols, opt, nil)
}

// QuantizeInt4Measured is QuantizeInt4Into that also adds the error of the result to m, as
// m.AddInt4(w, dst, baseIndex) would, with the same bits. With one worker on the CPU it measures
// each chunk right after quantizing it, while the chunk's values are still in cache, instead of
// reading the whole slab again.
func QuantizeInt4Measured(ctx context.Context, dst *Int4Result, w []float32, rows, cols int, opt Int4Options, m *Metrics, baseIndex int64) error {
	if _, cpu := opt.backend().(kernels.CPU); !cpu || opt.Workers != 1 {
		if err := quantizeInt4Into(ctx, dst, w, rows, cols, opt, nil); err != nil {
			return err
		}
		return m.AddInt4(w, dst, baseIndex)
	}
	var acc kernels.ErrAccumulator
	if err := quantizeInt4Into(ctx, dst, w, rows, cols, opt, &acc); err != nil {
		return err
	}
	m.Merge(metricsOf(acc.Result(baseIndex)))
	return nil
}

// quantizeInt4Into runs the backend's quantizer chunk by chunk; with acc set (one worker: the
// chunks come in order) it adds each chunk's error sums to acc as soon as the chunk is done.
func quantizeInt4Into(ctx context.Context, dst *Int4Result, w []float32, rows, cols int, opt Int4Options, acc *kernels.ErrAccumulator) error {
	be := opt.backend()
	var scales []float32
	return quantizeInt4Rows(ctx, dst, w, rows, cols, opt, nil, be, slabStep(be, chunkElems/max(cols, 1), rows),
		func(out kernels.Int4Out, src []float32, n int, p *kernels.Int4Params) error {
			if err := be.QuantizeInt4(out, src, n, cols, p); err != nil || acc == nil {
				return err
			}
			scales = resize(scales, len(out.Scales)/2)
			kernels.DecodeBF16(scales, out.Scales)
			if err := acc.AddInt4(src, out.Packed, scales, n, cols, p.GroupSize); err != nil {
				return fmt.Errorf("quantize: INT4 error sums: %w: %w", ErrBadShape, err)
			}
			return nil
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
	p, err := opt.params(cols)
	if err != nil {
		return fmt.Errorf("quantize: %w: %w", ErrInvalidOptions, err)
	}
	g := p.GroupSize
	ng := cols / g
	*res = Int4Result{
		Rows: rows, Cols: cols, GroupSize: g,
		Packed: resize(res.Packed, rows*cols/2),
		Scales: resize(res.Scales, 2*rows*ng),
		stats:  resize(res.stats, rows*ng),
	}
	stats := res.stats
	err = forChunks(ctx, rows, step, opt.Workers, func(r0, r1 int) error {
		out := kernels.Int4Out{
			Packed: res.Packed[r0*cols/2 : r1*cols/2],
			Scales: res.Scales[2*r0*ng : 2*r1*ng],
			Stats:  stats[r0*ng : r1*ng],
		}
		return kernelErr(be, quant(out, w[r0*cols:r1*cols], r1-r0, &p), r0, cols)
	})
	if err != nil {
		return err
	}
	// In locals, not through res: the sums stay in registers instead of making each addition
	// wait for the store of the one before (the same additions in the same order).
	var sumSq, sumSqErr, rtnErr float64
	var clipped int64
	for _, st := range stats {
		sumSq += float64(st.SumSq)
		sumSqErr += float64(st.Err)
		rtnErr += float64(st.RTNErr)
		clipped += int64(st.Clipped)
	}
	res.SumSq, res.SumSqErr, res.RTNSumSqErr, res.Clipped = sumSq, sumSqErr, rtnErr, clipped
	return nil
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
