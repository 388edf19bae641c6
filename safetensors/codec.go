package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"pdq/internal/floatcodec"
)

// Scalar conversions between float32 and the narrow float formats found in checkpoints live in
// pdq/internal/floatcodec (a leaf the kernels share); these names forward to it. The bulk
// helpers below work on little-endian byte slices, the order in which safetensors stores elements.

// BF16ToFloat32 widens a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(h uint16) float32 { return floatcodec.BF16ToFloat32(h) }

// Float32ToBF16 rounds f to bfloat16, nearest even; NaN stays NaN.
func Float32ToBF16(f float32) uint16 { return floatcodec.Float32ToBF16(f) }

// RoundBF16 rounds f to the nearest bfloat16 value and widens it back.
func RoundBF16(f float32) float32 { return floatcodec.RoundBF16(f) }

// F16ToFloat32 widens an IEEE binary16 bit pattern to float32 (exact).
func F16ToFloat32(h uint16) float32 { return floatcodec.F16ToFloat32(h) }

// Float32ToF16 rounds f to IEEE binary16, nearest even; overflow gives infinity.
func Float32ToF16(f float32) uint16 { return floatcodec.Float32ToF16(f) }

// F8E4M3ToFloat32 decodes an FP8 e4m3fn code (no infinities, max 448).
func F8E4M3ToFloat32(c uint8) float32 { return floatcodec.F8E4M3ToFloat32(c) }

// Float32ToF8E4M3 rounds f to e4m3fn, nearest even, saturating at ±448; NaN gives NaN.
func Float32ToF8E4M3(f float32) uint8 { return floatcodec.Float32ToF8E4M3(f) }

// F8E5M2ToFloat32 decodes an FP8 e5m2 code.
func F8E5M2ToFloat32(c uint8) float32 { return floatcodec.F8E5M2ToFloat32(c) }

// Float32ToF8E5M2 rounds f to e5m2, nearest even.
func Float32ToF8E5M2(f float32) uint8 { return floatcodec.Float32ToF8E5M2(f) }

var (
	f16Table  = floatcodec.F16Table()
	e4m3Table = floatcodec.E4M3Table()
	e5m2Table = floatcodec.E5M2Table()
)

// DecodeFloat32 decodes the little-endian elements of src, of dtype dt, into dst, which must hold
// exactly len(src)/size elements. Supported: F32, F16, BF16, F8_E4M3, F8_E5M2, F64.
func DecodeFloat32(dst []float32, src []byte, dt DType) error {
	bits := dt.Bits()
	if !dt.IsFloat() {
		return fmt.Errorf("safetensors: decode %s to float32: %w", dt, ErrUnsupportedDType)
	}
	if len(src)*8 != len(dst)*bits {
		return fmt.Errorf("safetensors: decode %s: %d bytes for %d elements", dt, len(src), len(dst))
	}
	switch dt {
	case BF16:
		DecodeBF16(dst, src)
	case F16:
		for i := range dst {
			dst[i] = f16Table[binary.LittleEndian.Uint16(src[2*i:])]
		}
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case F8E4M3:
		DecodeF8E4M3(dst, src)
	case F8E5M2:
		t := e5m2Table
		for i, c := range src {
			dst[i] = t[c]
		}
	}
	return nil
}

// DecodeBF16 widens len(dst) little-endian BF16 values from src.
func DecodeBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
	}
}

// DecodeF8E4M3 decodes len(dst) FP8 e4m3 codes from src by table.
func DecodeF8E4M3(dst []float32, src []byte) {
	t := e4m3Table
	src = src[:len(dst)]
	for i, c := range src {
		dst[i] = t[c]
	}
}

// EncodeFloat32 encodes src into dst as little-endian elements of dtype dt, rounding to nearest even.
// dst must hold exactly len(src) elements. Supported: F32, F16, BF16, F8_E4M3, F8_E5M2, F64.
func EncodeFloat32(dst []byte, src []float32, dt DType) error {
	if !dt.IsFloat() {
		return fmt.Errorf("safetensors: encode float32 to %s: %w", dt, ErrUnsupportedDType)
	}
	if len(dst)*8 != len(src)*dt.Bits() {
		return fmt.Errorf("safetensors: encode %s: %d bytes for %d elements", dt, len(dst), len(src))
	}
	switch dt {
	case BF16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(f))
		}
	case F16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], Float32ToF16(f))
		}
	case F32:
		for i, f := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	case F64:
		for i, f := range src {
			binary.LittleEndian.PutUint64(dst[8*i:], math.Float64bits(float64(f)))
		}
	case F8E4M3:
		for i, f := range src {
			dst[i] = Float32ToF8E4M3(f)
		}
	case F8E5M2:
		for i, f := range src {
			dst[i] = Float32ToF8E5M2(f)
		}
	}
	return nil
}
