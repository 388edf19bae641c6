package quantize

import (
	"context"

	"pdq/kernels"
)

// FP8Result is an FP8 e4m3 block-quantized slab in the DeepSeek layout.
type FP8Result struct {
	Rows, Cols int
	// Data holds F8_E4M3 codes, shape [Rows, Cols].
	Data []byte
	// ScaleInv holds the per-block multipliers (weight_scale_inv), shape
	// [ceil(Rows/128), ceil(Cols/128)]: absmax(block)/448 over the block's real elements, and
	// 1 for an all-zero block (whose codes are all ±0, so it dequantizes to zeros).
	ScaleInv []float32
}

// QuantizeFP8Block quantizes w (rows×cols) to FP8 e4m3 in 128×128 blocks: scale =
// absmax/448 in float32, code = e4m3(x/scale) rounded to nearest even. A slab must start on a
// multiple of 128 rows of the tensor. Non-finite input is refused (ErrNonFinite). workers <= 0
// means GOMAXPROCS; the output does not depend on it.
func QuantizeFP8Block(ctx context.Context, w []float32, rows, cols int, workers int) (*FP8Result, error) {
	if rows < 0 || cols < 0 || len(w) != rows*cols {
		return nil, badShape("FP8 source has %d elements, want %d×%d", len(w), rows, cols)
	}
	const b = kernels.FP8Block
	bc := (cols + b - 1) / b
	res := &FP8Result{
		Rows: rows, Cols: cols,
		Data:     make([]byte, rows*cols),
		ScaleInv: make([]float32, (rows+b-1)/b*bc),
	}
	if cols == 0 {
		return res, ctx.Err()
	}
	be := kernels.CPU{}
	bands := (rows + b - 1) / b
	step := max(1, chunkElems/(b*cols))
	err := forChunks(ctx, bands, step, workers, func(b0, b1 int) error {
		r0, r1 := b0*b, min(rows, b1*b)
		return kernelErr(be, be.QuantizeFP8Block(res.Data[r0*cols:r1*cols], res.ScaleInv[b0*bc:b1*bc], w[r0*cols:r1*cols], r1-r0, cols), r0, cols)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DequantizeFP8Block expands 128×128-block FP8 codes into dst: dst = e4m3(code)·scaleInv[block].
func DequantizeFP8Block(dst []float32, data []byte, scaleInv []float32, rows, cols int) error {
	if rows < 0 || cols < 0 {
		return badShape("FP8 dequantize %d×%d", rows, cols)
	}
	return kernelErr(kernels.CPU{}, kernels.CPU{}.DequantizeFP8Block(dst, data, scaleInv, rows, cols, kernels.FP8Block, kernels.FP8Block), 0, max(cols, 1))
}
