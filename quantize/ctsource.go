package quantize

import (
	"encoding/binary"
	"fmt"
	"math"

	"pdq/internal/floatcodec"
	"pdq/kernels"
	"pdq/safetensors"
)

// Decoders of weights that arrive already quantized (docs/FP4.md): compressed-tensors
// pack-quantized INT4, nvfp4-pack-quantized and mxfp4-pack-quantized, and ModelOpt NVFP4. Each
// turns a slab of rows into exact float32 values: (q - z)·s for INT4 (a product of at most 5
// and 24 significant bits, exact in float32; the library rounds it to the scale's dtype), and
// f32(value(code)·s) for the FP4 formats with s the float32 effective scale of kernels'
// NVFP4Scale (S/G), MXFP4Scale (2^(c-127)) or f32(S·scale_2) for ModelOpt.

// PackedFormat names the layout of an already-quantized weight.
type PackedFormat uint8

const (
	// PackedInt4 is compressed-tensors pack-quantized INT4: weight_packed I32 [N, K/8] (nibble
	// q+8, element i of a row at bit 4(i%8) of word i/8), weight_scale BF16, F16 or F32
	// [N, K/g], weight_shape [N, K], and for asymmetric schemes weight_zero_point I32
	// [ceil(N/8), K/g] (nibble z+8, packed along the rows).
	PackedInt4 PackedFormat = iota + 1
	// PackedNVFP4 is nvfp4-pack-quantized: weight_packed U8 [N, K/2] (E2M1 codes, element 2i in
	// the low nibble), weight_scale F8_E4M3 [N, K/16], weight_global_scale F32 [1]; the
	// effective scale is S/G.
	PackedNVFP4
	// PackedMXFP4 is mxfp4-pack-quantized: weight_packed U8 [N, K/2], weight_scale U8 (E8M0)
	// [N, K/32]; the effective scale is 2^(c-127).
	PackedMXFP4
	// PackedModelOptNVFP4 is ModelOpt's NVFP4: weight U8 [N, K/2] packed as PackedNVFP4,
	// weight_scale F8_E4M3 [N, K/16], weight_scale_2 F32 (a multiplier, the inverse of a global
	// scale); the effective scale is f32(S·scale_2).
	PackedModelOptNVFP4
)

// String returns the format's name as compressed-tensors spells it (ModelOpt: "modelopt-nvfp4").
func (f PackedFormat) String() string {
	switch f {
	case PackedInt4:
		return "pack-quantized"
	case PackedNVFP4:
		return "nvfp4-pack-quantized"
	case PackedMXFP4:
		return "mxfp4-pack-quantized"
	case PackedModelOptNVFP4:
		return "modelopt-nvfp4"
	}
	return fmt.Sprintf("PackedFormat(%d)", uint8(f))
}

// TensorMeta is the dtype and shape of one tensor, as a safetensors header gives them.
type TensorMeta struct {
	DType safetensors.DType
	Shape []int64
}

// PackedLayout describes an already-quantized weight of Rows×Cols elements: what
// InspectPackedInt4 and InspectFP4 derive from its tensors' dtypes and shapes.
type PackedLayout struct {
	Format     PackedFormat
	Rows, Cols int
	GroupSize  int
	ScaleDType safetensors.DType // INT4 only: BF16, F16 or F32
	Asymmetric bool              // INT4 only: a weight_zero_point tensor is present
}

// PackedSlab holds the bytes of rows [r0, r0+n) of an already-quantized weight: the slab's rows
// of the packed codes and of the scales and, for an asymmetric INT4 weight, the zero point
// words of rows [r0, r0+n) (r0 a multiple of 8: rows r0/8 .. ceil((r0+n)/8)-1 of
// weight_zero_point). Scale is the effective scale of the whole tensor for NVFP4 (the global
// scale G) and ModelOpt (scale_2); unused otherwise.
type PackedSlab struct {
	Packed    []byte
	Scales    []byte
	ZeroPoint []byte
	Scale     float32
}

// InspectPackedInt4 checks the tensors of a compressed-tensors pack-quantized INT4 weight
// (zeroPoint nil when symmetric; weightShape the values of weight_shape, see ParseWeightShape)
// and returns their layout. Shapes that do not fit give ErrBadShape, dtypes other than the
// layout's safetensors.ErrUnsupportedDType.
func InspectPackedInt4(packed, scale TensorMeta, zeroPoint *TensorMeta, weightShape []int64) (PackedLayout, error) {
	l := PackedLayout{Format: PackedInt4, ScaleDType: scale.DType, Asymmetric: zeroPoint != nil}
	if packed.DType != safetensors.I32 {
		return l, fmt.Errorf("quantize: INT4 weight_packed of dtype %s: %w", packed.DType, safetensors.ErrUnsupportedDType)
	}
	switch scale.DType {
	case safetensors.BF16, safetensors.F16, safetensors.F32:
	default:
		return l, fmt.Errorf("quantize: INT4 weight_scale of dtype %s: %w", scale.DType, safetensors.ErrUnsupportedDType)
	}
	if len(weightShape) != 2 || !positive(weightShape...) || weightShape[0] > math.MaxInt32 || weightShape[1] > math.MaxInt32 {
		return l, badShape("INT4 weight_shape %v is not [rows, cols]", weightShape)
	}
	n, k := weightShape[0], weightShape[1]
	if len(scale.Shape) != 2 || !positive(scale.Shape...) || k%scale.Shape[1] != 0 {
		return l, badShape("INT4 weight_scale of shape %v for a %d×%d weight", scale.Shape, n, k)
	}
	g := k / scale.Shape[1]
	if k%8 != 0 || g%8 != 0 || scale.Shape[0] != n || !sameShape(packed.Shape, n, k/8) {
		return l, badShape("INT4 weight_packed %v, weight_scale %v for a %d×%d weight (groups of %d)", packed.Shape, scale.Shape, n, k, g)
	}
	if zeroPoint != nil {
		if zeroPoint.DType != safetensors.I32 {
			return l, fmt.Errorf("quantize: INT4 weight_zero_point of dtype %s: %w", zeroPoint.DType, safetensors.ErrUnsupportedDType)
		}
		if !sameShape(zeroPoint.Shape, (n+7)/8, k/g) {
			return l, badShape("INT4 weight_zero_point of shape %v, want [%d, %d]", zeroPoint.Shape, (n+7)/8, k/g)
		}
	}
	l.Rows, l.Cols, l.GroupSize = int(n), int(k), int(g)
	return l, nil
}

// InspectFP4 checks the tensors of an FP4 weight of format f (PackedNVFP4, PackedMXFP4 or
// PackedModelOptNVFP4; global is weight_global_scale or weight_scale_2, ignored for MXFP4) and
// returns their layout. Errors are those of InspectPackedInt4.
func InspectFP4(f PackedFormat, packed, scale, global TensorMeta) (PackedLayout, error) {
	l := PackedLayout{Format: f}
	var g int64
	var scaleOK bool
	switch f {
	case PackedNVFP4, PackedModelOptNVFP4:
		g, scaleOK = kernels.NVFP4GroupSize, scale.DType == safetensors.F8E4M3
		if global.DType != safetensors.F32 {
			return l, fmt.Errorf("quantize: %s global scale of dtype %s: %w", f, global.DType, safetensors.ErrUnsupportedDType)
		}
		if len(global.Shape) > 1 || len(global.Shape) == 1 && global.Shape[0] != 1 {
			return l, badShape("%s global scale of shape %v, want [1] or []", f, global.Shape)
		}
	case PackedMXFP4:
		g, scaleOK = kernels.MXFP4GroupSize, scale.DType == safetensors.U8 || scale.DType == safetensors.F8E8M0
	default:
		return l, fmt.Errorf("quantize: %s is not an FP4 format: %w", f, ErrInvalidOptions)
	}
	if packed.DType != safetensors.U8 {
		return l, fmt.Errorf("quantize: %s packed weight of dtype %s: %w", f, packed.DType, safetensors.ErrUnsupportedDType)
	}
	if !scaleOK {
		return l, fmt.Errorf("quantize: %s weight_scale of dtype %s: %w", f, scale.DType, safetensors.ErrUnsupportedDType)
	}
	if len(packed.Shape) != 2 || !positive(packed.Shape...) || packed.Shape[1] > math.MaxInt32/2 || packed.Shape[0] > math.MaxInt32 {
		return l, badShape("%s packed weight of shape %v", f, packed.Shape)
	}
	n, k := packed.Shape[0], 2*packed.Shape[1]
	if k%g != 0 || !sameShape(scale.Shape, n, k/g) {
		return l, badShape("%s weight_scale of shape %v for a %d×%d weight in groups of %d", f, scale.Shape, n, k, g)
	}
	l.Rows, l.Cols, l.GroupSize = int(n), int(k), int(g)
	return l, nil
}

// SlabBytes returns the byte lengths a PackedSlab of n rows needs: packed codes, scales and
// zero point words (0 unless an asymmetric INT4 weight).
func (l PackedLayout) SlabBytes(n int) (packed, scales, zeroPoint int) {
	ng := l.Cols / max(l.GroupSize, 1)
	packed = n * l.Cols / 2
	if l.Format == PackedInt4 {
		scales = n * ng * l.ScaleDType.Bits() / 8
		if l.Asymmetric {
			zeroPoint = (n + 7) / 8 * ng * 4
		}
		return packed, scales, zeroPoint
	}
	return packed, n * ng, 0
}

// Decode decodes the n rows of s into dst (n×Cols values). Lengths that do not fit give
// ErrBadShape; NaN or infinite scales, tensor scales that are not positive, and scales so large
// that a decoded value overflows float32, ErrBadScale.
func (l PackedLayout) Decode(dst []float32, n int, s PackedSlab) error {
	if n < 0 || n > l.Rows || l.Rows > math.MaxInt32 || l.Cols <= 0 || l.Cols > math.MaxInt32 ||
		l.GroupSize <= 0 || l.Cols%l.GroupSize != 0 || l.GroupSize%8 != 0 {
		return badShape("%s slab of %d rows of a %d×%d weight in groups of %d", l.Format, n, l.Rows, l.Cols, l.GroupSize)
	}
	wp, ws, wz := l.SlabBytes(n)
	if len(dst) != n*l.Cols || len(s.Packed) != wp || len(s.Scales) != ws || len(s.ZeroPoint) != wz {
		return badShape("%s slab of %d rows: %d values, %d packed, %d scale and %d zero point bytes; want %d, %d, %d and %d",
			l.Format, n, len(dst), len(s.Packed), len(s.Scales), len(s.ZeroPoint), n*l.Cols, wp, ws, wz)
	}
	ng := n * l.Cols / l.GroupSize
	scales := make([]float32, ng)
	switch l.Format {
	case PackedInt4:
		if err := decodeFloat32(scales, s.Scales, l.ScaleDType); err != nil {
			return err
		}
		if i := firstNonFinite(scales); i >= 0 {
			return fmt.Errorf("quantize: INT4 scale element %d is %v: %w", i, scales[i], ErrBadScale)
		}
		if !l.Asymmetric {
			if err := (kernels.CPU{}).DequantizeInt4(dst, s.Packed, scales, n, l.Cols, l.GroupSize); err != nil {
				return fmt.Errorf("quantize: %w: %w", ErrBadShape, err)
			}
		} else {
			decodeInt4Asym(dst, s.Packed, scales, s.ZeroPoint, n, l.Cols, l.GroupSize)
		}
		return checkDecoded(l.Format, dst)
	case PackedNVFP4, PackedModelOptNVFP4:
		if !(s.Scale > 0 && s.Scale <= math.MaxFloat32) {
			return fmt.Errorf("quantize: %s tensor scale %v: %w", l.Format, s.Scale, ErrBadScale)
		}
		for i, c := range s.Scales {
			if c&0x7f == 0x7f {
				return fmt.Errorf("quantize: %s group scale %d is NaN: %w", l.Format, i, ErrBadScale)
			}
			if l.Format == PackedNVFP4 {
				scales[i] = kernels.NVFP4Scale(c, s.Scale)
			} else {
				scales[i] = floatcodec.F8E4M3ToFloat32(c) * s.Scale
			}
		}
	case PackedMXFP4:
		for i, c := range s.Scales {
			if c == 0xff {
				return fmt.Errorf("quantize: %s group scale %d is NaN: %w", l.Format, i, ErrBadScale)
			}
			scales[i] = kernels.MXFP4Scale(c)
		}
	default:
		return fmt.Errorf("quantize: unknown packed format %d: %w", l.Format, ErrInvalidOptions)
	}
	if i := firstNonFinite(scales); i >= 0 {
		return fmt.Errorf("quantize: %s effective scale %d is %v: %w", l.Format, i, scales[i], ErrBadScale)
	}
	if err := kernels.DequantizeFP4(dst, s.Packed, scales, n, l.Cols, l.GroupSize); err != nil {
		return fmt.Errorf("quantize: %w: %w", ErrBadShape, err)
	}
	return checkDecoded(l.Format, dst)
}

// checkDecoded refuses decoded values that overflowed float32: a scale so large that a level
// times it is infinite.
func checkDecoded(f PackedFormat, dst []float32) error {
	if i := firstNonFinite(dst); i >= 0 {
		return fmt.Errorf("quantize: %s element %d decodes to %v: %w", f, i, dst[i], ErrBadScale)
	}
	return nil
}

// decodeInt4Asym writes (q - z)·s for the nibbles of packed, the float32 group scales and the
// zero point words zp (eight rows per word along the rows).
func decodeInt4Asym(dst []float32, packed []byte, scales []float32, zp []byte, rows, cols, g int) {
	ng := cols / g
	for r := range rows {
		for k := range ng {
			w := binary.LittleEndian.Uint32(zp[4*((r/8)*ng+k):])
			z := int32(w>>(4*(r%8))&15) - 8
			s := scales[r*ng+k]
			for i := k * g; i < (k+1)*g; i += 2 {
				b := packed[(r*cols+i)/2]
				dst[r*cols+i] = float32(int32(b&15)-8-z) * s
				dst[r*cols+i+1] = float32(int32(b>>4)-8-z) * s
			}
		}
	}
}

// ParseWeightShape returns the values of a weight_shape tensor (I64 or I32, little-endian).
func ParseWeightShape(b []byte, dt safetensors.DType) ([]int64, error) {
	var w int
	switch dt {
	case safetensors.I64:
		w = 8
	case safetensors.I32:
		w = 4
	default:
		return nil, fmt.Errorf("quantize: weight_shape of dtype %s: %w", dt, safetensors.ErrUnsupportedDType)
	}
	if len(b)%w != 0 || len(b) > 8*w {
		return nil, badShape("weight_shape of %d bytes", len(b))
	}
	out := make([]int64, len(b)/w)
	for i := range out {
		if w == 8 {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		} else {
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return out, nil
}

// ParseTensorScale returns the one F32 value of an NVFP4 weight_global_scale or a ModelOpt
// weight_scale_2 tensor; it must be positive and finite (ErrBadScale).
func ParseTensorScale(b []byte, dt safetensors.DType) (float32, error) {
	if dt != safetensors.F32 {
		return 0, fmt.Errorf("quantize: tensor scale of dtype %s: %w", dt, safetensors.ErrUnsupportedDType)
	}
	if len(b) != 4 {
		return 0, badShape("tensor scale of %d bytes, want one F32", len(b))
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(b))
	if !(v > 0 && v <= math.MaxFloat32) {
		return 0, fmt.Errorf("quantize: tensor scale %v: %w", v, ErrBadScale)
	}
	return v, nil
}

func positive(v ...int64) bool {
	for _, x := range v {
		if x <= 0 {
			return false
		}
	}
	return true
}

func sameShape(s []int64, d0, d1 int64) bool { return len(s) == 2 && s[0] == d0 && s[1] == d1 }
