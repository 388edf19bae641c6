package kernels

import "math"

// ErrorSums implements Backend.
func (CPU) ErrorSums(ref, got []float32, base int64) ErrSums {
	s := ErrSums{N: int64(len(ref)), MaxAbsIdx: -1}
	got = got[:len(ref)]
	for i, rf := range ref {
		r, g := float64(rf), float64(got[i])
		e := g - r
		a := math.Abs(e)
		s.SumSqRef += float64(r * r)
		s.SumSqErr += float64(e * e)
		s.SumAbsErr += a
		s.Dot += float64(r * g)
		s.SumSqGot += float64(g * g)
		if a > s.MaxAbsErr || s.MaxAbsIdx < 0 {
			s.MaxAbsErr, s.MaxAbsIdx = a, base+int64(i)
		}
	}
	return s
}
