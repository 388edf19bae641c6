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

// errSumsMul returns Σ(x - q·s)², Σx·q and Σq² with q = level(x·inv).
func errSumsMul(x []float32, s, inv float32) (e, xq, qq float32) {
	var es, xs, qs [8]float32
	for len(x) >= 8 {
		v := x[:8:8]
		for j := range 8 {
			q := level(v[j] * inv)
			d := v[j] - float32(q*s)
			es[j] += float32(d * d)
			xs[j] += float32(v[j] * q)
			qs[j] += float32(q * q)
		}
		x = x[8:]
	}
	return sum8(&es), sum8(&xs), sum8(&qs)
}

// errSumsDiv is errSumsMul with the RTN levels q = level(x/s).
func errSumsDiv(x []float32, s float32) (e, xq, qq float32) {
	var es, xs, qs [8]float32
	for len(x) >= 8 {
		v := x[:8:8]
		for j := range 8 {
			q := level(v[j] / s)
			d := v[j] - float32(q*s)
			es[j] += float32(d * d)
			xs[j] += float32(v[j] * q)
			qs[j] += float32(q * q)
		}
		x = x[8:]
	}
	return sum8(&es), sum8(&xs), sum8(&qs)
}

func sum8(l *[8]float32) float32 { return lanes(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]) }

// sumSq returns Σx².
func sumSq(x []float32) float32 {
	var l [8]float32
	for len(x) >= 8 {
		v := x[:8:8]
		for j := range 8 {
			l[j] += float32(v[j] * v[j])
		}
		x = x[8:]
	}
	return sum8(&l)
}

// pack writes the levels of x for scale s (x/s when div, else x·(1/s)) into dst as
// little-endian words of eight nibbles and returns the group statistics (RTNErr left 0).
func pack(dst []byte, x []float32, s float32, div bool) GroupStats {
	inv := 1 / s
	var e, ss [8]float32
	var clip int32
	for len(x) >= 8 {
		v := x[:8:8]
		var w uint32
		for j := range 8 {
			var f float32
			if div {
				f = v[j] / s
			} else {
				f = v[j] * inv
			}
			if f >= 7.5 || f < -8.5 {
				clip++
			}
			if f < -8 {
				f = -8
			}
			if f > 7 {
				f = 7
			}
			r := f + rne
			q := r - rne
			w |= (math.Float32bits(r) + 8) & 15 << (4 * j)
			d := v[j] - float32(q*s)
			e[j] += float32(d * d)
			ss[j] += float32(v[j] * v[j])
		}
		binary.LittleEndian.PutUint32(dst, w)
		dst = dst[4:]
		x = x[8:]
	}
	return GroupStats{SumSq: sum8(&ss), Err: sum8(&e), Clipped: clip}
}
