package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The SIMD error sums track each lane's largest |got-ref| per chunk and look its index up only
// when a chunk beats the lane's maximum so far; they fuse the exact products. These tests feed
// them what stresses that: errors rising along the slice (every chunk a new maximum), constant
// errors (ties: the first index must win), NaN and ±Inf in ref and got (a NaN first element of a
// lane stays its maximum; later NaNs never win), lengths around the chunk size, and pieces that
// start off the lane boundary; then the fused INT4 and FP8 forms on arbitrary packed levels,
// codes and scales.

// errCase returns ref and got of length n of the given kind.
func errCase(r *rand.Rand, kind, n int) (ref, got []float32) {
	ref, got = make([]float32, n), make([]float32, n)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for i := range ref {
		switch kind {
		case 0: // rising errors
			ref[i], got[i] = float32(r.NormFloat64()), float32(i)*1e-3
			got[i] += ref[i]
		case 1: // one constant error: ties everywhere
			ref[i] = float32(i%5) * 0.25
			got[i] = ref[i] + 0.5
		case 2: // falling errors: the first chunk holds every maximum
			ref[i], got[i] = 0, float32(n-i)
		default:
			ref[i] = float32(r.NormFloat64())
			got[i] = ref[i] + float32(r.NormFloat64())*0.01
		}
	}
	if n > 0 {
		switch kind {
		case 4:
			ref[0] = nan // lane 0's first element
		case 5:
			for range 1 + r.IntN(4) {
				ref[r.IntN(n)] = nan
			}
		case 6:
			for range 1 + r.IntN(4) {
				got[r.IntN(n)] = [...]float32{inf, -inf, nan}[r.IntN(3)]
			}
		case 7:
			for i := range min(n, 8) {
				got[i] = nan // every lane starts with NaN
			}
		}
	}
	return ref, got
}

func TestSIMDErrorSumsMax(t *testing.T) {
	withSIMD(t, func(t *testing.T, set *loopSet) {
		r := rand.New(rand.NewPCG(13, 14))
		for _, n := range []int{1, 7, 8, 9, 63, 255, 256, 257, 520, 2049} {
			for kind := range 8 {
				ref, got := errCase(r, kind, n)
				for _, split := range []bool{false, true} {
					a1, a2 := newErrAcc(), newErrAcc()
					for lo := 0; lo < n; {
						hi := n
						if split {
							hi = min(n, lo+1+r.IntN(300))
						}
						set.errLanes(&a1, ref[lo:hi], got[lo:hi])
						errLanesScalar(&a2, ref[lo:hi], got[lo:hi])
						lo = hi
					}
					if s1, s2 := a1.result(0), a2.result(0); !sameSums(s1, s2) || !sameBits64(s1.MaxAbsErr, s2.MaxAbsErr) {
						t.Fatalf("n=%d kind %d split %v: %+v, want %+v", n, kind, split, s1, s2)
					}
				}
			}
		}
	})
}

// sameBits64 is bit equality, except that any two NaNs are equal.
func sameBits64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b
}

// TestErrorSumsFusedAnyInput compares ErrorSumsInt4 and ErrorSumsFP8Block of every loop set with
// the scalar set on arbitrary levels, codes (NaN codes included) and scales (zero, subnormal,
// huge, negative), references with NaN, ±Inf and rising errors, and shapes with and without
// whole vectors.
func TestErrorSumsFusedAnyInput(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	type fused struct {
		i4, f8 ErrSums
	}
	scale := func() float32 {
		return [...]float32{0, 1e-40, 3e38, -0.5, 0.01, 1, float32(math.Ldexp(1, r.IntN(60)-30))}[r.IntN(7)]
	}
	for trial := range 80 {
		g := []int{8, 16, 32, 64, 128}[r.IntN(5)]
		rows, cols := 1+r.IntN(6), g*(1+r.IntN(9))
		ref, _ := errCase(r, r.IntN(8), rows*cols)
		packed := make([]byte, rows*cols/2)
		for i := range packed {
			packed[i] = byte(r.Uint32())
		}
		sc := make([]float32, rows*cols/g)
		for i := range sc {
			sc[i] = scale()
		}
		frows, fcols := 1+r.IntN(200), 1+r.IntN(300)
		if trial%2 == 0 {
			fcols = 8 * (1 + r.IntN(40))
		}
		bh, bw := []int{1, 128, frows}[r.IntN(3)], []int{128, 8, fcols}[r.IntN(3)]
		fref, _ := errCase(r, r.IntN(8), frows*fcols)
		codes := make([]byte, len(fref))
		for i := range codes {
			codes[i] = byte(r.Uint32())
		}
		fsc := make([]float32, ceilDiv(frows, bh)*ceilDiv(fcols, bw))
		for i := range fsc {
			fsc[i] = scale()
		}
		var want fused
		withEverySet(t, func(t *testing.T) {
			var got fused
			var err error
			if got.i4, err = (CPU{}).ErrorSumsInt4(ref, packed, sc, rows, cols, g, 5); err != nil {
				t.Fatal(err)
			}
			if got.f8, err = (CPU{}).ErrorSumsFP8Block(fref, codes, fsc, frows, fcols, bh, bw, 0); err != nil {
				t.Fatal(err)
			}
			if lp == &scalarLoops {
				want = got
				return
			}
			if !sameSums(got.i4, want.i4) || !sameBits64(got.i4.MaxAbsErr, want.i4.MaxAbsErr) {
				t.Fatalf("trial %d INT4 g=%d %dx%d: %+v, want %+v", trial, g, rows, cols, got.i4, want.i4)
			}
			if !sameSums(got.f8, want.f8) || !sameBits64(got.f8.MaxAbsErr, want.f8.MaxAbsErr) {
				t.Fatalf("trial %d FP8 %dx%d blocks %dx%d: %+v, want %+v", trial, frows, fcols, bh, bw, got.f8, want.f8)
			}
		})
	}
}

// TestSIMDErrorSumsInt4NaNRefMax puts a NaN in ref inside the chunk that holds a lane's
// largest error: the NaN never wins, and the chunk's maximum must still reach the lane (a
// maximum instruction that returns its NaN operand made the whole chunk's maximum NaN, and
// the lane kept the smaller maximum of an earlier element).
func TestSIMDErrorSumsInt4NaNRefMax(t *testing.T) {
	const g, cols = 32, 256
	packed := make([]byte, cols/2)
	for i := range packed {
		packed[i] = 0x88 // level 0 everywhere...
	}
	scales := make([]float32, cols/g)
	for i := range scales {
		scales[i] = 1
	}
	for _, at := range []int{8, 16, 24, 40, 48, 56} {
		for _, big := range []int{at + 8, at + 16, at - 8} {
			ref := make([]float32, cols)
			ref[0] = 0.5 // lane 0's first element: error 0.5
			ref[at] = float32(math.NaN())
			p := slices.Clone(packed)
			p[big/2] = 0x8f // ...but level 7 at element big (lane 0): error 7
			var want ErrSums
			withEverySet(t, func(t *testing.T) {
				got, err := CPU{}.ErrorSumsInt4(ref, p, scales, 1, cols, g, 0)
				if err != nil {
					t.Fatal(err)
				}
				if lp == &scalarLoops {
					want = got
					return
				}
				if got.MaxAbsIdx != want.MaxAbsIdx || got.MaxAbsErr != want.MaxAbsErr {
					t.Fatalf("NaN at %d, error 7 at %d: max %g at %d, want %g at %d", at, big, got.MaxAbsErr, got.MaxAbsIdx, want.MaxAbsErr, want.MaxAbsIdx)
				}
			})
		}
	}
}
