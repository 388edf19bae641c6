package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Scalar conversions between float32 and the narrow float formats found in checkpoints.
// Every encoder rounds to nearest, ties to even. The bulk helpers below work on little-endian
// byte slices, the order in which safetensors stores elements.

// BF16ToFloat32 widens a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBF16 rounds f to bfloat16, nearest even. NaN stays NaN (quiet, sign kept); overflow
// rounds to infinity as IEEE rounding does.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep the sign, force a quiet mantissa bit
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// RoundBF16 returns f rounded to the nearest bfloat16 value, as a float32.
func RoundBF16(f float32) float32 { return BF16ToFloat32(Float32ToBF16(f)) }

// f16Table holds the float32 value of every binary16 code.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = f16Decode(uint16(i))
	}
	return &t
}()

func f16Decode(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	default: // zero or subnormal: man * 2^-24, exact in float32
		v := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	}
}

// F16ToFloat32 widens an IEEE binary16 bit pattern to float32 (exact).
func F16ToFloat32(h uint16) float32 { return f16Table[h] }

// minifloat describes a small IEEE-like float format for encodeMini.
type minifloat struct {
	mbits   uint   // mantissa bits
	bias    int    // exponent bias
	maxCode uint32 // largest finite magnitude code
	inf     uint32 // magnitude code of infinity, or 0 when the format has none (then it saturates)
	nan     uint32 // magnitude code used for NaN
	signBit uint32 // the sign bit of the code
}

var (
	fmtF16    = minifloat{mbits: 10, bias: 15, maxCode: 0x7bff, inf: 0x7c00, nan: 0x7e00, signBit: 0x8000}
	fmtE4M3FN = minifloat{mbits: 3, bias: 7, maxCode: 0x7e, inf: 0, nan: 0x7f, signBit: 0x80}
	fmtE5M2   = minifloat{mbits: 2, bias: 15, maxCode: 0x7b, inf: 0x7c, nan: 0x7e, signBit: 0x80}
)

// encode rounds f to the format, nearest even. Formats without infinity saturate finite and infinite
// inputs at their largest finite value; formats with infinity overflow to it.
func (m minifloat) encode(f float32) uint32 {
	b := math.Float32bits(f)
	var sign uint32
	if b>>31 != 0 {
		sign = m.signBit
	}
	a := b & 0x7fffffff
	if a > 0x7f800000 {
		return sign | m.nan
	}
	if a == 0x7f800000 {
		if m.inf != 0 {
			return sign | m.inf
		}
		return sign | m.maxCode
	}
	e := int(a>>23) - 127
	emin := 1 - m.bias
	var code uint32
	if e < emin {
		// Subnormal in the target: count units of 2^(emin-mbits); a carry into the lowest normal
		// code is the right answer too.
		scaled := float64(math.Float32frombits(a)) * math.Ldexp(1, m.bias-1+int(m.mbits))
		code = uint32(math.RoundToEven(scaled))
	} else {
		shift := 23 - m.mbits
		r := a + (1<<(shift-1) - 1) + (a>>shift)&1
		e2 := int(r>>23) - 127
		if e2+m.bias > 0xff { // cannot happen for our formats; guard the shift below
			e2 = 0xff - m.bias
		}
		code = uint32(e2+m.bias)<<m.mbits | (r>>shift)&(1<<m.mbits-1)
	}
	if code > m.maxCode {
		if m.inf != 0 {
			code = m.inf
		} else {
			code = m.maxCode
		}
	}
	return sign | code
}

// Float32ToF16 rounds f to IEEE binary16, nearest even; overflow gives infinity.
func Float32ToF16(f float32) uint16 { return uint16(fmtF16.encode(f)) }

// e4m3Table and e5m2Table decode every FP8 code.
var e4m3Table, e5m2Table = func() (*[256]float32, *[256]float32) {
	var a, b [256]float32
	for i := range 256 {
		a[i] = e4m3Decode(uint8(i))
		// e5m2 is the top byte of binary16.
		b[i] = f16Decode(uint16(i) << 8)
	}
	return &a, &b
}()

func e4m3Decode(c uint8) float32 {
	sign := float32(1)
	if c&0x80 != 0 {
		sign = -1
	}
	exp := int(c>>3) & 0xf
	man := float32(c & 7)
	switch {
	case exp == 0xf && c&7 == 7:
		return float32(math.NaN()) * sign
	case exp == 0:
		return sign * man * (1.0 / 512) // man * 2^-9
	default:
		return sign * (1 + man/8) * float32(math.Ldexp(1, exp-7))
	}
}

// F8E4M3ToFloat32 decodes an FP8 e4m3 (fn variant: no infinities, max 448) code.
func F8E4M3ToFloat32(c uint8) float32 { return e4m3Table[c] }

// Float32ToF8E4M3 rounds f to FP8 e4m3fn, nearest even, saturating at ±448 (infinities too).
// NaN becomes 0x7F or 0xFF.
func Float32ToF8E4M3(f float32) uint8 { return uint8(fmtE4M3FN.encode(f)) }

// F8E5M2ToFloat32 decodes an FP8 e5m2 code.
func F8E5M2ToFloat32(c uint8) float32 { return e5m2Table[c] }

// Float32ToF8E5M2 rounds f to FP8 e5m2, nearest even; overflow gives infinity, as in IEEE formats.
func Float32ToF8E5M2(f float32) uint8 { return uint8(fmtE5M2.encode(f)) }

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
