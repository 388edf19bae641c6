// Package floatcodec converts single values between float32 and the narrow float formats of
// model checkpoints: bfloat16, IEEE binary16, and the FP8 formats e4m3fn and e5m2. Every encoder
// rounds to nearest, ties to even. It is a leaf: the format package (safetensors) and the
// numeric kernels both build on it, neither on the other.
package floatcodec

import "math"

// FP8Block is the edge of the square blocks of the FP8 block layout (DeepSeek's
// weight_block_size [128, 128]): one scale per FP8Block×FP8Block weights. Every package that
// reads or writes the layout uses this constant.
const FP8Block = 128

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

// F16Table returns the table that decodes every binary16 pattern (shared, read-only).
func F16Table() *[1 << 16]float32 { return f16Table }

// E4M3Table and E5M2Table return the tables that decode every FP8 code (shared, read-only).
func E4M3Table() *[256]float32 { return e4m3Table }

// E5M2Table: see E4M3Table.
func E5M2Table() *[256]float32 { return e5m2Table }
