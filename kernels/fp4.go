package kernels

import (
	"errors"
	"fmt"
	"math"

	"pdq/internal/floatcodec"
)

// FP4 (E2M1) group quantization in compressed-tensors' nvfp4-pack-quantized and
// mxfp4-pack-quantized layouts (docs/FP4.md).
//
// An E2M1 code is a sign bit (bit 3) and a magnitude index m (bits 0-2) into the grid
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Two codes share a byte, element 2i in the low nibble. A group
// of elements shares one scale: NVFP4 groups of 16 an FP8 e4m3 scale S divided by a per-tensor
// float32 global scale G (effective scale f32(S/G)), MXFP4 groups of 32 an E8M0 exponent c
// (effective scale 2^(c-127)). A weight decodes to f32(value(code)·scale).
//
// Encoding an element x with effective scale s follows the library's rule:
//   - r = f32(x/s) (an IEEE division);
//   - r is rounded to BF16, nearest even (the library casts the ratio to bfloat16 before it
//     rounds to the grid);
//   - the magnitude is rounded to the grid, ties to the even index, saturating at 6: index m
//     counts the thresholds 0.25 (exclusive), 0.75, 1.25 (exclusive), 1.75, 2.5 (exclusive),
//     3.5, 5 (exclusive) that |r| passes;
//   - the sign bit is r's sign bit, so a negative element that rounds to zero is code 8 (-0).
//
// The error of a group is Σ(x - f32(value(code)·s))² in float32, element i in lane i%8 and the
// lanes combined as for INT4 (package documentation).

// The E2M1 decision thresholds as float32 bit patterns. A magnitude at a threshold rounds to
// the even index: the exclusive ones (ties down) are compared with >, the others with >=.
const (
	e2m1T1 = 0x3e800000 // 0.25, exclusive
	e2m1T2 = 0x3f400000 // 0.75
	e2m1T3 = 0x3fa00000 // 1.25, exclusive
	e2m1T4 = 0x3fe00000 // 1.75
	e2m1T5 = 0x40200000 // 2.5, exclusive
	e2m1T6 = 0x40600000 // 3.5
	e2m1T7 = 0x40a00000 // 5, exclusive
)

// e2m1Values lists the value of each of the sixteen E2M1 codes.
var e2m1Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// E2M1Value returns the value of the E2M1 code c (its low four bits).
func E2M1Value(c uint8) float32 { return e2m1Values[c&15] }

// E2M1Code returns the E2M1 code nearest to v, ties to the even magnitude index, saturating at
// ±6; the sign bit is v's. v must not be NaN. Unlike the quantizers, it does not round v to
// BF16 first.
func E2M1Code(v float32) uint8 {
	b := math.Float32bits(v)
	return uint8(b>>28)&8 | e2m1Mag(b&0x7fffffff)
}

// e2m1Mag returns the magnitude index of the non-negative float32 bit pattern a.
func e2m1Mag(a uint32) uint8 {
	var m uint8
	if a > e2m1T1 {
		m++
	}
	if a >= e2m1T2 {
		m++
	}
	if a > e2m1T3 {
		m++
	}
	if a >= e2m1T4 {
		m++
	}
	if a > e2m1T5 {
		m++
	}
	if a >= e2m1T6 {
		m++
	}
	if a > e2m1T7 {
		m++
	}
	return m
}

// fp4Encode returns the code of the ratio r as the quantizers take it: r rounded to BF16, then
// to the grid (E2M1Code of floatcodec.RoundBF16(r)). r must be finite.
func fp4Encode(r float32) uint8 {
	b := math.Float32bits(r)
	a := b & 0x7fffffff
	a = (a + 0x7fff + (a>>16)&1) &^ 0xffff // BF16, nearest even; finite a stays finite below 2^128
	return uint8(b>>28)&8 | e2m1Mag(a)
}

// fp4NoAsm keeps the AVX-512 FP4 batches in the Go vector code instead of the assembly
// (fp4*_amd64.s), for the tests that compare the two; like SetSIMD it must not change while
// kernels run.
var fp4NoAsm bool

// Group sizes of the two layouts.
const (
	NVFP4GroupSize = 16
	MXFP4GroupSize = 32
)

// FP4Out holds the destination slices of QuantizeNVFP4 and QuantizeMXFP4 for a rows×cols slab.
type FP4Out struct {
	Packed []byte       // rows·cols/2 bytes, element 2i in the low nibble
	Scales []byte       // rows·cols/GroupSize scale codes: e4m3 (NVFP4) or E8M0 (MXFP4)
	Stats  []GroupStats // rows·cols/GroupSize entries; Clipped counts elements with |r| > 6
}

// ErrGlobalScale reports an NVFP4 global scale outside [NVFP4MinGlobal, NVFP4MaxGlobal].
var ErrGlobalScale = errors.New("kernels: NVFP4 global scale out of range")

// The range of NVFP4 global scales QuantizeNVFP4 accepts: every effective scale S/G of a
// non-zero e4m3 S is then a normal, finite float32 (a ratio x/(S/G) that overflows is +-Inf,
// which saturates to code ±6 like any ratio beyond 6).
const (
	NVFP4MinGlobal = 0x1p-100
	NVFP4MaxGlobal = 0x1p100
)

// nvfp4AmaxMin and nvfp4AmaxMax bound the tensor absolute maximum NVFP4GlobalScale uses; within
// them the result is the library's, and the global scale always lies in the accepted range.
const (
	nvfp4AmaxMin = 0x1p-64
	nvfp4AmaxMax = 0x1p64
)

// NVFP4GlobalScale returns the NVFP4 global scale of a tensor (or of the tensors sharing one,
// such as the gate and up projections of one expert) whose absolute maximum is amax:
// bf16(448·6/bf16(amax)) as float32, compressed-tensors' generate_gparam on BF16 statistics.
// amax is clamped to [2^-64, 2^64] first (the library clamps at the smallest normal float32,
// where its result overflows); an all-zero tensor thus gets a finite global scale.
func NVFP4GlobalScale(amax float32) float32 {
	a := floatcodec.RoundBF16(float32(math.Abs(float64(amax))))
	a = min(max(a, nvfp4AmaxMin), nvfp4AmaxMax)
	return floatcodec.RoundBF16(448 * 6 / a)
}

// nvfp4RTNCode returns the e4m3 code of the RTN scale of a group with absolute maximum a under
// global scale g: e4m3(f32(g·bf16(a/6))), a zero code replaced by 0.125's (the library's eps).
func nvfp4RTNCode(a, g float32) uint8 {
	c := e4m3(g * floatcodec.RoundBF16(a/6))
	if c == 0 {
		c = nvfp4EpsCode
	}
	return c
}

// nvfp4EpsCode is the e4m3 code of 0.125, the scale the library gives a group whose scale
// rounds to zero.
const nvfp4EpsCode = 0x20

// NVFP4Scale returns the effective scale f32(S/g) of the e4m3 scale code c under global scale g.
func NVFP4Scale(c uint8, g float32) float32 { return floatcodec.F8E4M3ToFloat32(c) / g }

// mxfp4RTNCode returns the E8M0 code of the RTN scale of a group with absolute maximum a (a
// non-negative float32 bit pattern): the exponent of a rounded up to the next power of two when
// its significand is at least 1.75, minus 2, biased by 127 and clamped at 0 (zero and
// subnormal maxima give 0).
func mxfp4RTNCode(ab uint32) uint8 {
	e := int((ab+0x200000)>>23) - 2
	return uint8(max(e, 0))
}

// MXFP4Scale returns the effective scale 2^(c-127) of the E8M0 code c (255, E8M0's NaN, gives
// +Inf).
func MXFP4Scale(c uint8) float32 {
	if c == 0 {
		return 0x1p-127
	}
	return math.Float32frombits(uint32(c) << 23)
}

// checkFP4Shapes checks the slice lengths of an FP4 quantization of a rows×cols slab in groups
// of g and returns the number of groups.
func checkFP4Shapes(out FP4Out, src []float32, rows, cols, g int) (int, error) {
	if cols%g != 0 || rows < 0 || cols < 0 {
		return 0, shapeErr("FP4 row", cols, g)
	}
	n := rows * cols
	ng := n / g
	switch {
	case len(src) != n:
		return 0, shapeErr("source", len(src), n)
	case len(out.Packed) != n/2:
		return 0, shapeErr("packed bytes", len(out.Packed), n/2)
	case len(out.Scales) != ng:
		return 0, shapeErr("scale bytes", len(out.Scales), ng)
	case len(out.Stats) != ng:
		return 0, shapeErr("group stats", len(out.Stats), ng)
	}
	return ng, nil
}

func checkGlobal(g float32) error {
	if !(g >= NVFP4MinGlobal && g <= NVFP4MaxGlobal) {
		return fmt.Errorf("%w: %v", ErrGlobalScale, g)
	}
	return nil
}
