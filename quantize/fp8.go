package quantize

import (
	"context"
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

// QuantizeFP8Block quantizes w (rows×cols) to FP8 e4m3 in 128×128 blocks on opt.Backend: scale
// = absmax/448 in float32, code = e4m3(x/scale) rounded to nearest even. A slab must start on a
// multiple of 128 rows of the tensor. Non-finite input is refused (ErrNonFinite). The output does
// not depend on opt.Workers or the backend. FP8Bands takes a slab band by band.
func QuantizeFP8Block(ctx context.Context, w []float32, rows, cols int, opt FP8Options) (*FP8Result, error) {
	if rows < 0 || cols < 0 || len(w) != rows*cols {
		return nil, badShape("FP8 source has %d elements, want %d×%d", len(w), rows, cols)
	}
	res := new(FP8Result)
	sizeFP8(res, rows, cols)
	if err := quantizeFP8Rows(ctx, res, w, opt); err != nil {
		return nil, err
	}
	return res, nil
}

// DequantizeFP8Block expands 128×128-block FP8 codes into dst: dst = e4m3(code)·scaleInv[block].
func DequantizeFP8Block(dst []float32, data []byte, scaleInv []float32, rows, cols int) error {
	return DequantizeFP8BlockOn(nil, dst, data, scaleInv, rows, cols)
}
