package kernels

import (
	"encoding/binary"
	"math"
)

// The per-group loops of INT4 quantization. Each processes eight elements per step, element j
// of a step going to lane j; see the package documentation for the order of the final sum.
// Levels are kept as float32 integers in [-8, 7].

// rne is 1.5·2^23: for |v| ≤ 2^22, (v + rne) - rne is v rounded to the nearest integer, ties to
// even, and the low mantissa bits of v + rne hold that integer in two's complement.
const rne = 12582912

// level clamps v to [-8, 7] and rounds it to the nearest integer, ties to even. Clamping first
// is equivalent (the bounds are integers) and keeps v in the range of the rounding trick.
// If-clamps are used because they compile to well-predicted branches, much faster than the
// float min/max builtins.
func level(v float32) float32 {
	if v < -8 {
		v = -8
	}
	if v > 7 {
		v = 7
	}
	return (v + rne) - rne
}

func lanes(e0, e1, e2, e3, e4, e5, e6, e7 float32) float32 {
	return ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7))
}

// errMul returns Σ(x - q·s)² with q = level(x·inv).
func errMul(x []float32, s, inv float32) float32 {
	var e0, e1, e2, e3, e4, e5, e6, e7 float32
	for len(x) >= 8 {
		v := x[:8:8]
		q0 := level(v[0] * inv)
		q1 := level(v[1] * inv)
		q2 := level(v[2] * inv)
		q3 := level(v[3] * inv)
		q4 := level(v[4] * inv)
		q5 := level(v[5] * inv)
		q6 := level(v[6] * inv)
		q7 := level(v[7] * inv)
		d0 := v[0] - float32(q0*s)
		d1 := v[1] - float32(q1*s)
		d2 := v[2] - float32(q2*s)
		d3 := v[3] - float32(q3*s)
		d4 := v[4] - float32(q4*s)
		d5 := v[5] - float32(q5*s)
		d6 := v[6] - float32(q6*s)
		d7 := v[7] - float32(q7*s)
		e0 += float32(d0 * d0)
		e1 += float32(d1 * d1)
		e2 += float32(d2 * d2)
		e3 += float32(d3 * d3)
		e4 += float32(d4 * d4)
		e5 += float32(d5 * d5)
		e6 += float32(d6 * d6)
		e7 += float32(d7 * d7)
		x = x[8:]
	}
	return lanes(e0, e1, e2, e3, e4, e5, e6, e7)
}

// errDiv returns Σ(x - q·s)² with q = level(x/s), the RTN levels.
func errDiv(x []float32, s float32) float32 {
	var e0, e1, e2, e3, e4, e5, e6, e7 float32
	for len(x) >= 8 {
		v := x[:8:8]
		q0 := level(v[0] / s)
		q1 := level(v[1] / s)
		q2 := level(v[2] / s)
		q3 := level(v[3] / s)
		q4 := level(v[4] / s)
		q5 := level(v[5] / s)
		q6 := level(v[6] / s)
		q7 := level(v[7] / s)
		d0 := v[0] - float32(q0*s)
		d1 := v[1] - float32(q1*s)
		d2 := v[2] - float32(q2*s)
		d3 := v[3] - float32(q3*s)
		d4 := v[4] - float32(q4*s)
		d5 := v[5] - float32(q5*s)
		d6 := v[6] - float32(q6*s)
		d7 := v[7] - float32(q7*s)
		e0 += float32(d0 * d0)
		e1 += float32(d1 * d1)
		e2 += float32(d2 * d2)
		e3 += float32(d3 * d3)
		e4 += float32(d4 * d4)
		e5 += float32(d5 * d5)
		e6 += float32(d6 * d6)
		e7 += float32(d7 * d7)
		x = x[8:]
	}
	return lanes(e0, e1, e2, e3, e4, e5, e6, e7)
}

// sums returns, for one element x at scaled value f, the squared error, x·q and q².
func sums(x, f, s float32) (d2, xq, qq float32) {
	q := level(f)
	d := x - float32(q*s)
	return float32(d * d), float32(x * q), float32(q * q)
}

// errSumsMul returns Σ(x - q·s)², Σx·q and Σq² with q = level(x·inv).
func errSumsMul(x []float32, s, inv float32) (e, xq, qq float32) {
	var e0, e1, e2, e3, e4, e5, e6, e7 float32
	var x0, x1, x2, x3, x4, x5, x6, x7 float32
	var q0, q1, q2, q3, q4, q5, q6, q7 float32
	for len(x) >= 8 {
		v := x[:8:8]
		a0, b0, c0 := sums(v[0], v[0]*inv, s)
		a1, b1, c1 := sums(v[1], v[1]*inv, s)
		a2, b2, c2 := sums(v[2], v[2]*inv, s)
		a3, b3, c3 := sums(v[3], v[3]*inv, s)
		a4, b4, c4 := sums(v[4], v[4]*inv, s)
		a5, b5, c5 := sums(v[5], v[5]*inv, s)
		a6, b6, c6 := sums(v[6], v[6]*inv, s)
		a7, b7, c7 := sums(v[7], v[7]*inv, s)
		e0, e1, e2, e3, e4, e5, e6, e7 = e0+a0, e1+a1, e2+a2, e3+a3, e4+a4, e5+a5, e6+a6, e7+a7
		x0, x1, x2, x3, x4, x5, x6, x7 = x0+b0, x1+b1, x2+b2, x3+b3, x4+b4, x5+b5, x6+b6, x7+b7
		q0, q1, q2, q3, q4, q5, q6, q7 = q0+c0, q1+c1, q2+c2, q3+c3, q4+c4, q5+c5, q6+c6, q7+c7
		x = x[8:]
	}
	return lanes(e0, e1, e2, e3, e4, e5, e6, e7), lanes(x0, x1, x2, x3, x4, x5, x6, x7), lanes(q0, q1, q2, q3, q4, q5, q6, q7)
}

// errSumsDiv is errSumsMul with the RTN levels q = level(x/s).
func errSumsDiv(x []float32, s float32) (e, xq, qq float32) {
	var e0, e1, e2, e3, e4, e5, e6, e7 float32
	var x0, x1, x2, x3, x4, x5, x6, x7 float32
	var q0, q1, q2, q3, q4, q5, q6, q7 float32
	for len(x) >= 8 {
		v := x[:8:8]
		a0, b0, c0 := sums(v[0], v[0]/s, s)
		a1, b1, c1 := sums(v[1], v[1]/s, s)
		a2, b2, c2 := sums(v[2], v[2]/s, s)
		a3, b3, c3 := sums(v[3], v[3]/s, s)
		a4, b4, c4 := sums(v[4], v[4]/s, s)
		a5, b5, c5 := sums(v[5], v[5]/s, s)
		a6, b6, c6 := sums(v[6], v[6]/s, s)
		a7, b7, c7 := sums(v[7], v[7]/s, s)
		e0, e1, e2, e3, e4, e5, e6, e7 = e0+a0, e1+a1, e2+a2, e3+a3, e4+a4, e5+a5, e6+a6, e7+a7
		x0, x1, x2, x3, x4, x5, x6, x7 = x0+b0, x1+b1, x2+b2, x3+b3, x4+b4, x5+b5, x6+b6, x7+b7
		q0, q1, q2, q3, q4, q5, q6, q7 = q0+c0, q1+c1, q2+c2, q3+c3, q4+c4, q5+c5, q6+c6, q7+c7
		x = x[8:]
	}
	return lanes(e0, e1, e2, e3, e4, e5, e6, e7), lanes(x0, x1, x2, x3, x4, x5, x6, x7), lanes(q0, q1, q2, q3, q4, q5, q6, q7)
}

// sumSq returns Σx².
func sumSq(x []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for len(x) >= 8 {
		v := x[:8:8]
		s0 += float32(v[0] * v[0])
		s1 += float32(v[1] * v[1])
		s2 += float32(v[2] * v[2])
		s3 += float32(v[3] * v[3])
		s4 += float32(v[4] * v[4])
		s5 += float32(v[5] * v[5])
		s6 += float32(v[6] * v[6])
		s7 += float32(v[7] * v[7])
		x = x[8:]
	}
	return lanes(s0, s1, s2, s3, s4, s5, s6, s7)
}

// elem handles one element x at scaled value f for pack: its nibble shifted to position j, its
// squared error and whether its nearest level was clipped.
func elem(x, f, s float32, j uint) (nib uint32, d2 float32, clip int32) {
	if f >= 7.5 || f < -8.5 {
		clip = 1
	}
	if f < -8 {
		f = -8
	}
	if f > 7 {
		f = 7
	}
	r := f + rne
	d := x - float32((r-rne)*s)
	return (math.Float32bits(r) + 8) & 15 << (4 * j), float32(d * d), clip
}

// pack writes the levels of x for scale s into dst as little-endian words of eight nibbles and
// returns the group statistics (RTNErr left 0). The levels are those of RTN, level(x/s), when
// div is set, else level(x·(1/s)).
func pack(dst []byte, x []float32, s float32, div bool) GroupStats {
	if div {
		return lp.packDiv(dst, x, s)
	}
	return lp.packMul(dst, x, s, 1/s)
}

// packDiv is pack with the RTN levels level(x/s).
func packDiv(dst []byte, x []float32, s float32) GroupStats {
	var e0, e1, e2, e3, e4, e5, e6, e7 float32
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	var clip int32
	for len(x) >= 8 {
		v := x[:8:8]
		n0, a0, c0 := elem(v[0], v[0]/s, s, 0)
		n1, a1, c1 := elem(v[1], v[1]/s, s, 1)
		n2, a2, c2 := elem(v[2], v[2]/s, s, 2)
		n3, a3, c3 := elem(v[3], v[3]/s, s, 3)
		n4, a4, c4 := elem(v[4], v[4]/s, s, 4)
		n5, a5, c5 := elem(v[5], v[5]/s, s, 5)
		n6, a6, c6 := elem(v[6], v[6]/s, s, 6)
		n7, a7, c7 := elem(v[7], v[7]/s, s, 7)
		binary.LittleEndian.PutUint32(dst, n0|n1|n2|n3|n4|n5|n6|n7)
		e0, e1, e2, e3, e4, e5, e6, e7 = e0+a0, e1+a1, e2+a2, e3+a3, e4+a4, e5+a5, e6+a6, e7+a7
		clip += c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7
		s0 += float32(v[0] * v[0])
		s1 += float32(v[1] * v[1])
		s2 += float32(v[2] * v[2])
		s3 += float32(v[3] * v[3])
		s4 += float32(v[4] * v[4])
		s5 += float32(v[5] * v[5])
		s6 += float32(v[6] * v[6])
		s7 += float32(v[7] * v[7])
		dst = dst[4:]
		x = x[8:]
	}
	return GroupStats{
		SumSq:   lanes(s0, s1, s2, s3, s4, s5, s6, s7),
		Err:     lanes(e0, e1, e2, e3, e4, e5, e6, e7),
		Clipped: clip,
	}
}

// packMul is pack with the levels level(x·inv) of a searched scale.
func packMul(dst []byte, x []float32, s, inv float32) GroupStats {
	var e0, e1, e2, e3, e4, e5, e6, e7 float32
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	var clip int32
	for len(x) >= 8 {
		v := x[:8:8]
		n0, a0, c0 := elem(v[0], v[0]*inv, s, 0)
		n1, a1, c1 := elem(v[1], v[1]*inv, s, 1)
		n2, a2, c2 := elem(v[2], v[2]*inv, s, 2)
		n3, a3, c3 := elem(v[3], v[3]*inv, s, 3)
		n4, a4, c4 := elem(v[4], v[4]*inv, s, 4)
		n5, a5, c5 := elem(v[5], v[5]*inv, s, 5)
		n6, a6, c6 := elem(v[6], v[6]*inv, s, 6)
		n7, a7, c7 := elem(v[7], v[7]*inv, s, 7)
		binary.LittleEndian.PutUint32(dst, n0|n1|n2|n3|n4|n5|n6|n7)
		e0, e1, e2, e3, e4, e5, e6, e7 = e0+a0, e1+a1, e2+a2, e3+a3, e4+a4, e5+a5, e6+a6, e7+a7
		clip += c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7
		s0 += float32(v[0] * v[0])
		s1 += float32(v[1] * v[1])
		s2 += float32(v[2] * v[2])
		s3 += float32(v[3] * v[3])
		s4 += float32(v[4] * v[4])
		s5 += float32(v[5] * v[5])
		s6 += float32(v[6] * v[6])
		s7 += float32(v[7] * v[7])
		dst = dst[4:]
		x = x[8:]
	}
	return GroupStats{
		SumSq:   lanes(s0, s1, s2, s3, s4, s5, s6, s7),
		Err:     lanes(e0, e1, e2, e3, e4, e5, e6, e7),
		Clipped: clip,
	}
}
