package quantize

import (
	"fmt"
	"math"

	"pdq/kernels"
	"pdq/safetensors"
)

// Source decoders (FORMATS.md §2): each turns one slab of a source Linear weight into float32.
// They do not look for NaN or Inf in the weights: run CheckFinite on the result, with the
// tensor's name, before quantizing.

// DecodeDense decodes little-endian BF16, F16 or F32 elements into dst (exact).
func DecodeDense(dst []float32, src []byte, dt safetensors.DType) error {
	switch dt {
	case safetensors.BF16, safetensors.F16, safetensors.F32:
	default:
		return fmt.Errorf("quantize: dense weight of dtype %s: %w", dt, safetensors.ErrUnsupportedDType)
	}
	if len(src)*8 != len(dst)*dt.Bits() {
		return badShape("dense %s weight: %d bytes for %d elements", dt, len(src), len(dst))
	}
	return decodeFloat32(dst, src, dt)
}

// decodeFloat32 is safetensors.DecodeFloat32 with the dtypes dense checkpoints hold (BF16, F16,
// F32) decoded by kernels.DecodeDense (BF16 and F16 in vectors, the same bits).
func decodeFloat32(dst []float32, src []byte, dt safetensors.DType) error {
	if kt := kernelType(dt); kt != 0 && len(src) == len(dst)*kt.Size() {
		return kernels.DecodeDense(dst, src, kt)
	}
	return safetensors.DecodeFloat32(dst, src, dt)
}

// kernelType names a dense dtype of the format as the kernels do (0 for the others).
func kernelType(dt safetensors.DType) kernels.DType {
	switch dt {
	case safetensors.BF16:
		return kernels.BF16
	case safetensors.F16:
		return kernels.F16
	case safetensors.F32:
		return kernels.F32
	}
	return 0
}

// FP8BlockSize infers the block size of an FP8-block weight of rows×cols from the shape of its
// scale tensor [ceil(rows/bh), ceil(cols/bw)]. 128 is preferred whenever it fits, so a slab of
// a tensor with 128-row blocks (starting on a multiple of 128 rows) decodes correctly even when
// its row count is not a multiple of 128.
func FP8BlockSize(rows, cols int, scaleShape []int64) (bh, bw int, err error) {
	if len(scaleShape) != 2 || rows <= 0 || cols <= 0 {
		return 0, 0, badShape("FP8 block scale of shape %v for a %d×%d weight", scaleShape, rows, cols)
	}
	bh, okH := blockEdge(rows, scaleShape[0])
	bw, okW := blockEdge(cols, scaleShape[1])
	if !okH || !okW {
		return 0, 0, badShape("FP8 block scale of shape %v does not tile a %d×%d weight", scaleShape, rows, cols)
	}
	return bh, bw, nil
}

func blockEdge(n int, blocks int64) (int, bool) {
	if blocks <= 0 || blocks > int64(n) {
		return 0, false
	}
	if (n+kernels.FP8Block-1)/kernels.FP8Block == int(blocks) {
		return kernels.FP8Block, true
	}
	e := (n + int(blocks) - 1) / int(blocks)
	return e, (n+e-1)/e == int(blocks)
}

// DecodeFP8Block decodes an FP8-block weight slab (DeepSeek-V3 layout: F8_E4M3 codes and a
// float32 multiplier per block, weight_scale_inv) into dst: dst = e4m3(code)·scale[i/bh][j/bw].
// scale holds the slab's scale rows with shape scaleShape; BF16 scales are decoded with
// DecodeDense first. Non-finite scales are refused.
func DecodeFP8Block(dst []float32, src []byte, scale []float32, scaleShape []int64, rows, cols int) error {
	return DecodeFP8BlockOn(nil, dst, src, scale, scaleShape, rows, cols)
}

// DecodeFP8Channel decodes a compressed-tensors FP8 weight with one scale per output row
// (weight_scale of shape [rows, 1]) or one for the whole tensor (shape [1] or []):
// dst = e4m3(code)·scale. Block-shaped weight_scale tensors go to DecodeFP8Block.
func DecodeFP8Channel(dst []float32, src []byte, scale []float32, rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return badShape("FP8 channel weight %d×%d", rows, cols)
	}
	bh := 1
	switch len(scale) {
	case rows:
	case 1:
		bh = rows
	default:
		return badShape("FP8 channel scale has %d elements for %d rows", len(scale), rows)
	}
	if err := checkScales(scale); err != nil {
		return err
	}
	return kernelErr(kernels.CPU{}, kernels.CPU{}.DequantizeFP8Block(dst, src, scale, rows, cols, bh, cols), 0, cols)
}

func checkScales(scale []float32) error {
	if i := firstNonFinite(scale); i >= 0 {
		return fmt.Errorf("quantize: FP8 scale element %d is %v: %w", i, scale[i], ErrNonFinite)
	}
	return nil
}

// CheckUE8M0 verifies scales declared "scale_fmt": "ue8m0" (DeepSeek-V3.1): every value must be a
// positive power of two 2^e with e in [-127, 127], the values an unsigned E8M0 code can hold.
// They are stored as F32 and decode like any other scale.
func CheckUE8M0(scale []float32) error {
	for i, v := range scale {
		b := math.Float32bits(v)
		normalPow2 := b&0x807fffff == 0 && b != 0 && b < 0x7f800000
		if !normalPow2 && b != 0x00400000 { // 2^-127 is the one subnormal E8M0 value
			return fmt.Errorf("quantize: ue8m0 scale element %d is %v, not a power of two: %w", i, v, ErrBadScale)
		}
	}
	return nil
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
