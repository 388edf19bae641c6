package quantize

import (
	"context"
	"fmt"

	"pdq/kernels"
	"pdq/safetensors"
)

// Backend-aware forms of the quantize entry points; the plain functions are these on
// kernels.CPU. Results are identical for every backend (the Backend contract: identical bytes).

// slabStep returns the rows per backend call: CPU calls take chunks of about chunkElems
// elements spread over the workers; any other backend (a GPU) gets the whole slab in one call,
// as it splits and pipelines the work itself and small calls would only add latency.
func slabStep(be kernels.Backend, cpuStep, rows int) int {
	if _, cpu := be.(kernels.CPU); cpu || be == nil {
		return cpuStep
	}
	return max(rows, 1)
}

// FP8Options configures QuantizeFP8BlockOpt.
type FP8Options struct {
	// Workers bounds the goroutines used on the CPU; <= 0 means GOMAXPROCS.
	Workers int
	// Backend runs the loops; nil means kernels.CPU.
	Backend kernels.Backend
}

func backendOr(be kernels.Backend) kernels.Backend {
	if be == nil {
		return kernels.CPU{}
	}
	return be
}

// QuantizeFP8BlockOpt is QuantizeFP8Block on opt.Backend: the same checks, the same bytes.
func QuantizeFP8BlockOpt(ctx context.Context, w []float32, rows, cols int, opt FP8Options) (*FP8Result, error) {
	res := new(FP8Result)
	if err := QuantizeFP8BlockInto(ctx, res, w, rows, cols, opt); err != nil {
		return nil, err
	}
	return res, nil
}

// QuantizeFP8BlockInto is QuantizeFP8BlockOpt writing its result into res, whose slices'
// storage it reuses when large enough (every block's codes and scale are written): a caller
// quantizing slab after slab allocates nothing after the first. On error res's contents are
// unspecified.
func QuantizeFP8BlockInto(ctx context.Context, res *FP8Result, w []float32, rows, cols int, opt FP8Options) error {
	if rows < 0 || cols < 0 || len(w) != rows*cols {
		return badShape("FP8 source has %d elements, want %d×%d", len(w), rows, cols)
	}
	const b = kernels.FP8Block
	bc := (cols + b - 1) / b
	*res = FP8Result{
		Rows: rows, Cols: cols,
		Data:     resize(res.Data, rows*cols),
		ScaleInv: resize(res.ScaleInv, (rows+b-1)/b*bc),
	}
	if cols == 0 {
		return ctx.Err()
	}
	be := backendOr(opt.Backend)
	bands := (rows + b - 1) / b
	step := slabStep(be, max(1, chunkElems/(b*cols)), bands)
	return forChunks(ctx, bands, step, opt.Workers, func(b0, b1 int) error {
		r0, r1 := b0*b, min(rows, b1*b)
		return kernelErr(be, be.QuantizeFP8Block(res.Data[r0*cols:r1*cols], res.ScaleInv[b0*bc:b1*bc], w[r0*cols:r1*cols], r1-r0, cols), r0, cols)
	})
}

// DequantizeFP8BlockOn is DequantizeFP8Block on backend be (nil: kernels.CPU).
func DequantizeFP8BlockOn(be kernels.Backend, dst []float32, data []byte, scaleInv []float32, rows, cols int) error {
	if rows < 0 || cols < 0 {
		return badShape("FP8 dequantize %d×%d", rows, cols)
	}
	be = backendOr(be)
	return kernelErr(be, be.DequantizeFP8Block(dst, data, scaleInv, rows, cols, kernels.FP8Block, kernels.FP8Block), 0, max(cols, 1))
}

// DecodeFP8BlockOn is DecodeFP8Block on backend be (nil: kernels.CPU): the FP8-block source
// decode e4m3(code)·scale with the block size inferred from the scale shape.
func DecodeFP8BlockOn(be kernels.Backend, dst []float32, src []byte, scale []float32, scaleShape []int64, rows, cols int) error {
	bh, bw, err := FP8BlockSize(rows, cols, scaleShape)
	if err != nil {
		return err
	}
	if int64(len(scale)) != scaleShape[0]*scaleShape[1] {
		return badShape("FP8 block scale has %d elements, shape %v", len(scale), scaleShape)
	}
	if err := checkScales(scale); err != nil {
		return err
	}
	be = backendOr(be)
	return kernelErr(be, be.DequantizeFP8Block(dst, src, scale, rows, cols, bh, bw), 0, cols)
}

// DequantizeInt4On is DequantizeInt4 on backend be (nil: kernels.CPU): the scales are decoded
// and checked on the host, the expansion runs on the backend.
func DequantizeInt4On(be kernels.Backend, dst []float32, packed, scales []byte, scaleDType safetensors.DType, rows, cols, groupSize int) error {
	be = backendOr(be)
	g := groupSize
	if g == 0 {
		g = cols
	}
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
