package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// The batched FP4 loops (sixteen groups at once on AVX-512, eight on AVX2) against the scalar
// specification, on data made for their shortcuts: ratios taken as |x|·(1/s), batches that hold
// a non-finite value, zero, subnormal, tiny and huge groups, extreme global scales.

// TestSIMDFP4ProductNearMidpoint puts ratios x/s on the BF16 rounding midpoints next to every
// E2M1 threshold, chosen so that x·(1/s) rounds to BF16 on the other side of the midpoint and
// gets another code: a loop that used the product there without the division would differ.
func TestSIMDFP4ProductNearMidpoint(t *testing.T) {
	const rows, cols = 16, 256
	rng := rand.New(rand.NewPCG(31, 32))
	thresholds := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6}
	for _, g := range []float32{NVFP4GlobalScale(1), NVFP4GlobalScale(0.0123), 3e-9, 7e12} {
		x := make([]float32, rows*cols)
		found := 0
		for k := range len(x) / NVFP4GroupSize {
			grp := x[k*16 : (k+1)*16]
			m := float32(0.5+rng.Float64()/2) * 6 / g
			s := NVFP4Scale(nvfp4RTNCode(m, g), g)
			inv := 1 / s
			grp[0] = m
			for i := 1; i < len(grp); i++ {
				grp[i] = float32(rng.NormFloat64()) * m / 4
				th := math.Float32bits(thresholds[rng.IntN(len(thresholds))])
				mid := math.Float32frombits(th + 0x8000)
				if rng.IntN(2) == 0 {
					mid = math.Float32frombits(th - 0x8000)
				}
				base := math.Float32bits(mid * s)
				for d := range uint32(129) {
					v := math.Float32frombits(base + d - 64)
					if v < m && fp4Encode(v/s) != fp4Encode(v*inv) {
						grp[i] = v
						if rng.IntN(2) == 0 {
							grp[i] = -v
						}
						found++
						break
					}
				}
			}
		}
		if found < 40 {
			t.Fatalf("global scale %v: only %d ratios whose product rounds apart", g, found)
		}
		fp4AllSets(t, x, rows, cols, g)
	}
}

// TestSIMDFP4Batches runs whole batches of special groups: all zero, all -0, subnormal only,
// below TinyAbsMax, huge (ratios that overflow), one large element among tiny ones, and
// groups whose RTN scale code is the smallest or the largest, under the extreme global scales.
func TestSIMDFP4Batches(t *testing.T) {
	const rows, cols = 8, 512
	rng := rand.New(rand.NewPCG(41, 42))
	negZero := float32(math.Copysign(0, -1))
	x := make([]float32, rows*cols)
	for k := range len(x) / 32 {
		grp := x[k*32 : (k+1)*32]
		for i := range grp {
			n := float32(rng.NormFloat64())
			switch k % 8 {
			case 0:
				grp[i] = 0
			case 1:
				grp[i] = negZero
			case 2:
				grp[i] = math.Float32frombits(rng.Uint32() & 0x807fffff)
			case 3:
				grp[i] = n * 1e-25
			case 4:
				grp[i] = n * 3e37
			case 5:
				grp[i] = n * 1e-30
				if i == 7 {
					grp[i] = 1
				}
			case 6:
				grp[i] = n * 0x1p-60
			default:
				grp[i] = n
			}
		}
	}
	for _, g := range []float32{NVFP4MinGlobal, NVFP4MaxGlobal, 1, NVFP4GlobalScale(maxAbs(x))} {
		fp4AllSets(t, x, rows, cols, g)
	}
}

// TestSIMDFP4Random compares the loop sets on slabs of random magnitudes over the whole float32
// range and random global scales.
func TestSIMDFP4Random(t *testing.T) {
	const rows, cols = 2, 1024
	rng := rand.New(rand.NewPCG(51, 52))
	for range 12 {
		x := make([]float32, rows*cols)
		spread := rng.Float64() * 60
		center := rng.Float64()*200 - 100
		for i := range x {
			x[i] = float32(math.Exp2(center + spread*(rng.Float64()-0.5)))
			if rng.IntN(2) == 0 {
				x[i] = -x[i]
			}
			if rng.IntN(50) == 0 {
				x[i] = 0
			}
		}
		g := float32(math.Exp2(rng.Float64()*200 - 100))
		fp4AllSets(t, x, rows, cols, g)
		fp4AllSets(t, x, rows, cols, NVFP4GlobalScale(maxAbs(x)))
	}
}

// TestSIMDFP4NonFiniteInBatch puts NaN, +Inf or -Inf in a batch after whole good batches: every
// loop set reports the scalar loop's index and value. (What an error leaves in the outputs is
// not specified: the scalar loop itself writes groups a chunk at a time.)
func TestSIMDFP4NonFiniteInBatch(t *testing.T) {
	const rows, cols = 4, 512
	prev := lp
	defer func() { lp, fp4NoAsm = prev, false }()
	base := goldenInput(rows, cols)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, at := range []int{0, 16*16*2 + 5, 16*32*2 + 37, rows*cols - 1} {
			x := append([]float32(nil), base...)
			x[at] = bad
			for _, gs := range []int{NVFP4GroupSize, MXFP4GroupSize} {
				for _, set := range fp4Variants() {
					lp, fp4NoAsm = set.set, set.noAsm
					out := newFP4Out(rows, cols, gs)
					var err error
					if gs == NVFP4GroupSize {
						err = QuantizeNVFP4(out, x, rows, cols, 1, SearchMSE)
					} else {
						err = QuantizeMXFP4(out, x, rows, cols, SearchRTN)
					}
					var nf *NonFiniteError
					if !errors.As(err, &nf) || nf.Index != int64(at) || math.Float32bits(nf.Value) != math.Float32bits(bad) {
						t.Fatalf("%s, groups of %d, %v at %d: %v", set.name, gs, bad, at, err)
					}
				}
			}
		}
	}
}

// TestSIMDErrorSumsFP4Pieces adds the FP4 error sums of a slab a few rows at a time (the fused
// loops then start on a lane boundary with the lanes filled, or the first piece fills them) and
// of a slab with NaN and infinite references, and compares every loop set with the scalar sums
// of the whole.
func TestSIMDErrorSumsFP4Pieces(t *testing.T) {
	const rows, cols = 6, 96
	prev := lp
	defer func() { lp = prev }()
	x := goldenInput(rows, cols)
	for _, gs := range []int{NVFP4GroupSize, MXFP4GroupSize} {
		out := newFP4Out(rows, cols, gs)
		sc := make([]float32, len(out.Scales))
		lp = loopSets[0]
		if gs == NVFP4GroupSize {
			g := NVFP4GlobalScale(maxAbs(x))
			if err := QuantizeNVFP4(out, x, rows, cols, g, SearchMSE); err != nil {
				t.Fatal(err)
			}
			NVFP4Scales(sc, out.Scales, g)
		} else {
			if err := QuantizeMXFP4(out, x, rows, cols, SearchMSE); err != nil {
				t.Fatal(err)
			}
			MXFP4Scales(sc, out.Scales)
		}
		ref := append([]float32(nil), x...)
		ref[0], ref[cols+3], ref[2*cols+17] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
		for _, r := range [][]float32{x, ref} {
			lp = loopSets[0]
			want, err := (CPU{}).ErrorSumsFP4(r, out.Packed, sc, rows, cols, gs, 5)
			if err != nil {
				t.Fatal(err)
			}
			for _, set := range loopSets {
				lp = set
				for _, step := range []int{1, 2, rows} {
					var e ErrAccumulator
					for r0 := 0; r0 < rows; r0 += step {
						r1 := min(rows, r0+step)
						k0, k1 := r0*cols/gs, r1*cols/gs
						if err := e.AddFP4(r[r0*cols:r1*cols], out.Packed[r0*cols/2:r1*cols/2], sc[k0:k1], r1-r0, cols, gs); err != nil {
							t.Fatal(err)
						}
					}
					got := e.Result(5)
					if !sameErrSumsNaN(got, want) {
						t.Fatalf("%s, groups of %d, %d rows a piece: %+v, scalar %+v", set.name, gs, step, got, want)
					}
				}
			}
		}
	}
}

// sameErrSumsNaN compares two error sums whose NaN fields are NaN in both.
func sameErrSumsNaN(a, b ErrSums) bool {
	eq := func(x, y float64) bool { return x == y || x != x && y != y }
	return a.N == b.N && eq(a.SumSqRef, b.SumSqRef) && eq(a.SumSqErr, b.SumSqErr) && eq(a.SumAbsErr, b.SumAbsErr) &&
		eq(a.Dot, b.Dot) && eq(a.SumSqGot, b.SumSqGot) && eq(a.MaxAbsErr, b.MaxAbsErr) && a.MaxAbsIdx == b.MaxAbsIdx
}

// TestSIMDErrorSumsFP4NaNInMaxLane puts a NaN reference in a lane and that lane's largest
// error in the same chunk, before or after it: the chunk maximum is the largest non-NaN
// |got-ref| (a maximum taken with the NaN as the returned operand would lose it), so every loop
// set, with and without the assembly, reports the scalar loop's maximum and its index.
func TestSIMDErrorSumsFP4NaNInMaxLane(t *testing.T) {
	const rows, cols = 4, 256
	prev := lp
	defer func() { lp, fp4NoAsm = prev, false }()
	x := goldenInput(rows, cols)
	for _, gs := range []int{NVFP4GroupSize, MXFP4GroupSize} {
		lp = loopSets[0]
		out := newFP4Out(rows, cols, gs)
		sc := make([]float32, len(out.Scales))
		if gs == NVFP4GroupSize {
			g := NVFP4GlobalScale(maxAbs(x))
			if err := QuantizeNVFP4(out, x, rows, cols, g, SearchRTN); err != nil {
				t.Fatal(err)
			}
			NVFP4Scales(sc, out.Scales, g)
		} else {
			if err := QuantizeMXFP4(out, x, rows, cols, SearchRTN); err != nil {
				t.Fatal(err)
			}
			MXFP4Scales(sc, out.Scales)
		}
		for _, at := range [][2]int{{300, 340}, {340, 300}, {517, 765}, {765, 517}, {64 + 3, 64 + 3 + 8*20}, {64 + 3 + 8*20, 64 + 3}} {
			ref := append([]float32(nil), x...)
			ref[at[0]], ref[at[1]] = float32(math.NaN()), 1e3
			lp, fp4NoAsm = loopSets[0], false
			want, err := (CPU{}).ErrorSumsFP4(ref, out.Packed, sc, rows, cols, gs, 5)
			if err != nil {
				t.Fatal(err)
			}
			if want.MaxAbsIdx != int64(at[1])+5 {
				t.Fatalf("scalar maximum at %d, want %d", want.MaxAbsIdx, at[1]+5)
			}
			for _, v := range fp4Variants() {
				lp, fp4NoAsm = v.set, v.noAsm
				got, err := (CPU{}).ErrorSumsFP4(ref, out.Packed, sc, rows, cols, gs, 5)
				if err != nil {
					t.Fatal(err)
				}
				if !sameErrSumsNaN(got, want) {
					t.Fatalf("%s, groups of %d, NaN at %d, maximum at %d: %+v, scalar %+v", v.name, gs, at[0], at[1], got, want)
				}
			}
		}
	}
}
