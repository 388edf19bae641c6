package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSIMDBatchSearchHuge runs the batched searches on groups whose extreme is near the float32
// maximum, where the scalar product q·s of some candidates overflows while the assembly
// candidate loops (search_amd64.h) take x − q·s as one fused multiply-add: every error, choice,
// byte and statistic must still be the scalar loops', for the plain and the weighted search.
func TestSIMDBatchSearchHuge(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, g := range []int{32, 64, 128} {
		rows, cols := 2, 32*g
		x := make([]float32, rows*cols)
		for k := 0; k < len(x); k += g {
			grp := x[k : k+g]
			a := float32(math.Ldexp(1+r.Float64(), 120+r.IntN(8))) // [2^120, 2^128)
			spread := []float32{1, 0.25, 1.0 / 64}[r.IntN(3)]
			for i := range grp {
				grp[i] = max(-a, min(a, float32(r.NormFloat64())*a*spread))
			}
			grp[r.IntN(g)] = []float32{a, -a}[r.IntN(2)]
		}
		p := mustParams(t, g, SearchMSE, false)
		compareSlabSets(t, x, rows, cols, p)
		d := make([]float32, cols)
		for i := range d {
			d[i] = float32(math.Exp(r.NormFloat64()))
		}
		var want slabOut
		withEverySet(t, func(t *testing.T) {
			got := quantSlabWeighted(x, rows, cols, p, d)
			if lp == &scalarLoops {
				want = got
				return
			}
			if msg := sameSlab(got, want); msg != "" {
				t.Fatalf("weighted, g=%d: %s", g, msg)
			}
		})
	}
}
