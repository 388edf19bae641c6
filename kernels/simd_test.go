package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
)

// The SIMD loop sets must return exactly what the scalar specification returns. These tests run
// every loop of every set this CPU has against the scalar loop on adversarial input; FuzzSIMD
// does the same on fuzzer-chosen bytes. Where the CPU has no SIMD set (or the binary was built
// without GOEXPERIMENT=simd) they only check the scalar set against itself and say so.

// withSIMD runs f once for every non-scalar loop set, with that set selected.
func withSIMD(t *testing.T, f func(t *testing.T, set *loopSet)) {
	t.Helper()
	if len(loopSets) == 1 {
		t.Log("no SIMD loop set in this build or on this CPU: scalar only")
	}
	for _, set := range loopSets[1:] {
		runWithSet(t, set, func(t *testing.T) { f(t, set) })
	}
}

// runWithSet runs f as a subtest with set selected.
func runWithSet(t *testing.T, set *loopSet, f func(t *testing.T)) {
	t.Helper()
	t.Run(set.name, func(t *testing.T) {
		prev, err := SetSIMD(set.name)
		if err != nil {
			t.Fatal(err)
		}
		defer SetSIMD(prev)
		f(t)
	})
}

// withEverySet runs f once for every loop set, the scalar one included.
func withEverySet(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, set := range loopSets {
		runWithSet(t, set, f)
	}
}

// adversarial returns n values mixing ordinary weights, zeros, ±0, subnormals, exact ties of
// the level rounding for scale s, values on the clamp edges (x/s = 7.5, -8.5, 7, -8) and large
// magnitudes.
func adversarial(r *rand.Rand, n int, s float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(12) {
		case 0:
			x[i] = 0
		case 1:
			x[i] = float32(math.Copysign(0, -1))
		case 2:
			x[i] = math.Float32frombits(r.Uint32N(0x800000) | r.Uint32N(2)<<31) // subnormal
		case 3:
			x[i] = (float32(r.IntN(33)-16) + 0.5) * s // a tie
		case 4:
			x[i] = [...]float32{7.5, -8.5, 7, -8, 7.4999995, -8.500001}[r.IntN(6)] * s
		case 5:
			x[i] = float32(r.NormFloat64()) * 1e30
		default:
			x[i] = float32(r.NormFloat64()) * s * 4
		}
	}
	return x
}

func bitsEq(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func TestSIMDLoopsMatchScalar(t *testing.T) {
	sc := &scalarLoops
	withSIMD(t, func(t *testing.T, set *loopSet) {
		r := rand.New(rand.NewPCG(1, 2))
		for trial := range 3000 {
			n := 8 * (1 + r.IntN(24))
			s := float32(math.Ldexp(1+r.Float64(), r.IntN(40)-30))
			if trial%7 == 0 {
				s = -s
			}
			x := adversarial(r, n, s)
			inv := 1 / s
			if got, want := set.absMaxBits(x), sc.absMaxBits(x); got != want {
				t.Fatalf("absMaxBits %x, want %x", got, want)
			}
			check := func(what string, got, want float32) {
				t.Helper()
				if !bitsEq(got, want) && !(got != got && want != want) {
					t.Fatalf("trial %d, n=%d, s=%v: %s = %v, want %v", trial, n, s, what, got, want)
				}
			}
			check("sumSq", set.sumSq(x), sc.sumSq(x))
			check("errDiv", set.errDiv(x, s), sc.errDiv(x, s))
			cand := adversarial(r, 1+r.IntN(40), s)
			for i := range cand {
				if cand[i] == 0 || math.IsInf(float64(1/cand[i]), 0) {
					cand[i] = s
				}
			}
			e1, e2 := make([]float32, len(cand)), make([]float32, len(cand))
			set.errMulBatch(x, cand, e1)
			sc.errMulBatch(x, cand, e2)
			for i := range e1 {
				check("errMulBatch", e1[i], e2[i])
			}
			a1, b1, c1 := set.errSumsMul(x, s, inv)
			a2, b2, c2 := sc.errSumsMul(x, s, inv)
			check("errSumsMul.e", a1, a2)
			check("errSumsMul.xq", b1, b2)
			check("errSumsMul.qq", c1, c2)
			a1, b1, c1 = set.errSumsDiv(x, s)
			a2, b2, c2 = sc.errSumsDiv(x, s)
			check("errSumsDiv.e", a1, a2)
			check("errSumsDiv.xq", b1, b2)
			check("errSumsDiv.qq", c1, c2)
			w := make([]float32, n)
			for i := range w {
				w[i] = float32(math.Exp(r.NormFloat64() * 1.5))
			}
			for _, div := range []bool{false, true} {
				a1, b1, c1 = set.wSums(x, w, s, inv, div)
				a2, b2, c2 = sc.wSums(x, w, s, inv, div)
				check("wSums.e", a1, a2)
				check("wSums.xq", b1, b2)
				check("wSums.qq", c1, c2)
			}
			d1, d2 := make([]byte, n/2), make([]byte, n/2)
			if g1, g2 := set.packDiv(d1, x, s), sc.packDiv(d2, x, s); !sameStats(g1, g2) || string(d1) != string(d2) {
				t.Fatalf("trial %d: packDiv %+v %x, want %+v %x", trial, g1, d1, g2, d2)
			}
			if g1, g2 := set.packMul(d1, x, s, inv), sc.packMul(d2, x, s, inv); !sameStats(g1, g2) || string(d1) != string(d2) {
				t.Fatalf("trial %d: packMul %+v %x, want %+v %x", trial, g1, d1, g2, d2)
			}
		}
	})
}

func TestSIMDAbsMaxTails(t *testing.T) {
	withSIMD(t, func(t *testing.T, set *loopSet) {
		r := rand.New(rand.NewPCG(3, 4))
		for n := range 70 {
			x := adversarial(r, n, 0.01)
			if n > 0 {
				x[r.IntN(n)] = float32(math.Inf(-1 + 2*r.IntN(2)))
			}
			if got, want := set.absMaxBits(x), absMaxBits(x); got != want {
				t.Fatalf("n=%d: %x, want %x", n, got, want)
			}
		}
	})
}

func TestSIMDErrorSumsMatchScalar(t *testing.T) {
	withSIMD(t, func(t *testing.T, set *loopSet) {
		r := rand.New(rand.NewPCG(5, 6))
		for trial := range 500 {
			n := r.IntN(300)
			ref := adversarial(r, n, 0.02)
			got := make([]float32, n)
			for i := range got {
				got[i] = ref[i] + float32(r.NormFloat64())*0.001
				if r.IntN(10) == 0 {
					got[i] = ref[i] // ties of the maximum (zero error)
				}
			}
			a1, a2 := newErrAcc(), newErrAcc()
			// Split into pieces that start off the lane boundary, as fused callers may.
			for lo := 0; lo < n; {
				hi := min(n, lo+1+r.IntN(40))
				set.errLanes(&a1, ref[lo:hi], got[lo:hi])
				errLanesScalar(&a2, ref[lo:hi], got[lo:hi])
				lo = hi
			}
			if s1, s2 := a1.result(7), a2.result(7); !sameSums(s1, s2) {
				t.Fatalf("trial %d n=%d: %+v, want %+v", trial, n, s1, s2)
			}
		}
	})
}

// TestErrorSumsFused: the fused INT4 and FP8 sums are ErrorSums of the dequantized values.
func TestErrorSumsFused(t *testing.T) {
	run := func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for trial := range 60 {
			g := []int{8, 32, 64, 128, 512}[r.IntN(5)]
			rows, cols := 1+r.IntN(9), g*(1+r.IntN(4))
			x := adversarial(r, rows*cols, 0.01)
			for i := range x {
				if math.Abs(float64(x[i])) > 1e3 {
					x[i] = 1
				}
			}
			p := mustParams(t, g, SearchMSE, false)
			out := quant(t, x, rows, cols, p)
			sc := make([]float32, len(out.Scales)/2)
			for i := range sc {
				sc[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(out.Scales[2*i:])) << 16)
			}
			deq := make([]float32, len(x))
			if err := (CPU{}).DequantizeInt4(deq, out.Packed, sc, rows, cols, g); err != nil {
				t.Fatal(err)
			}
			want := CPU{}.ErrorSums(x, deq, 3)
			got, err := CPU{}.ErrorSumsInt4(x, out.Packed, sc, rows, cols, g, 3)
			if err != nil || !sameSums(got, want) {
				t.Fatalf("INT4 trial %d: %+v %v, want %+v", trial, got, err, want)
			}
			frows, fcols := 1+r.IntN(300), 1+r.IntN(300)
			y := adversarial(r, frows*fcols, 0.01)
			codes := make([]byte, len(y))
			scales := make([]float32, ceilDiv(frows, FP8Block)*ceilDiv(fcols, FP8Block))
			if err := (CPU{}).QuantizeFP8Block(codes, scales, y, frows, fcols); err != nil {
				t.Fatal(err)
			}
			deq = make([]float32, len(y))
			if err := (CPU{}).DequantizeFP8Block(deq, codes, scales, frows, fcols, FP8Block, FP8Block); err != nil {
				t.Fatal(err)
			}
			want = CPU{}.ErrorSums(y, deq, 0)
			got, err = CPU{}.ErrorSumsFP8Block(y, codes, scales, frows, fcols, FP8Block, FP8Block, 0)
			if err != nil || !sameSums(got, want) {
				t.Fatalf("FP8 trial %d (%dx%d): %+v %v, want %+v", trial, frows, fcols, got, err, want)
			}
		}
	}
	withEverySet(t, run)
}

func TestSIMDDecodeE4M3(t *testing.T) {
	codes := make([]byte, 256+5)
	for i := range codes {
		codes[i] = byte(i)
	}
	withSIMD(t, func(t *testing.T, set *loopSet) {
		for _, s := range []float32{1, 0.5, 3.1e-5, -2, 1e-38, 3e38} {
			a, b := make([]float32, len(codes)), make([]float32, len(codes))
			set.decodeE4M3(a, codes, s)
			decodeE4M3Scalar(b, codes, s)
			for i := range a {
				if !bitsEq(a[i], b[i]) { // NaN too: a re-encode keeps its sign
					t.Fatalf("s=%v code %#x: %v, want %v", s, codes[i], a[i], b[i])
				}
			}
			x := adversarial(rand.New(rand.NewPCG(9, 10)), 301, s)
			for i := 0; i < len(x); i += 7 { // the e4m3 edges: saturation, NaN, the normal/subnormal boundary
				x[i] = [...]float32{448, 464, -480, 1e30, 0x1p-6, 0x1p-7, 0x1.fp-7, 0x1p-10, float32(math.NaN()), float32(math.Inf(-1))}[i%10] * s
			}
			c1, c2 := make([]byte, len(x)), make([]byte, len(x))
			set.encodeE4M3(c1, x, s)
			encodeE4M3Scalar(c2, x, s)
			if !reflect.DeepEqual(c1, c2) {
				t.Fatalf("s=%v: encodeE4M3 differs", s)
			}
		}
	})
}

// TestGoldenHashesEverySIMD: the golden output hashes hold with every loop set.
func TestGoldenHashesEverySIMD(t *testing.T) {
	withSIMD(t, func(t *testing.T, _ *loopSet) { TestGoldenHashes(t) })
}

// FuzzSIMD compares every SIMD loop set with the scalar one on fuzzer-chosen groups and scales.
func FuzzSIMD(f *testing.F) {
	seed := make([]byte, 4*32)
	for i := range 32 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits((float32(i)-16)*0.25+0.125))
	}
	f.Add(seed, float32(0.25))
	f.Add(make([]byte, 64), float32(1))
	f.Fuzz(func(t *testing.T, data []byte, s float32) {
		n := len(data) / 4 / 8 * 8
		if n == 0 || s == 0 || s != s || math.IsInf(float64(s), 0) || math.IsInf(float64(1/s), 0) {
			return
		}
		x := make([]float32, n)
		for i := range x {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			if v != v || math.IsInf(float64(v), 0) {
				v = 0
			}
			x[i] = v
		}
		for _, set := range loopSets[1:] {
			var e1, e2 [1]float32
			set.errMulBatch(x, []float32{s}, e1[:])
			errMulBatch(x, []float32{s}, e2[:])
			if !bitsEq(e1[0], e2[0]) && !(e1[0] != e1[0] && e2[0] != e2[0]) {
				t.Fatalf("%s errMulBatch differs", set.name)
			}
			d1, d2 := make([]byte, n/2), make([]byte, n/2)
			if g1, g2 := set.packMul(d1, x, s, 1/s), packMul(d2, x, s, 1/s); !sameStats(g1, g2) || string(d1) != string(d2) {
				t.Fatalf("%s packMul differs", set.name)
			}
			if g1, g2 := set.packDiv(d1, x, s), packDiv(d2, x, s); !sameStats(g1, g2) || string(d1) != string(d2) {
				t.Fatalf("%s packDiv differs", set.name)
			}
			a1, a2 := newErrAcc(), newErrAcc()
			y := make([]float32, n)
			for i := range y {
				y[i] = x[(i+1)%n] * s
			}
			set.errLanes(&a1, x, y)
			errLanesScalar(&a2, x, y)
			if r1, r2 := a1.result(0), a2.result(0); !sameSums(r1, r2) {
				t.Fatalf("%s errLanes %+v, want %+v", set.name, r1, r2)
			}
		}
	})
}

// sameSums compares error sums bit for bit (NaN sums of overflowing input equal each other).
func sameSums(a, b ErrSums) bool {
	eq := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) || x != x && y != y }
	return a.N == b.N && a.MaxAbsIdx == b.MaxAbsIdx && eq(a.SumSqRef, b.SumSqRef) && eq(a.SumSqErr, b.SumSqErr) &&
		eq(a.SumAbsErr, b.SumAbsErr) && eq(a.Dot, b.Dot) && eq(a.SumSqGot, b.SumSqGot) && eq(a.MaxAbsErr, b.MaxAbsErr)
}

// TestSIMDSelected: without PDQ_NOSIMD the fastest set this CPU has is the one in use (and the
// one PDQ_WANT_SIMD names, when set).
func TestSIMDSelected(t *testing.T) {
	if v := os.Getenv("PDQ_NOSIMD"); v != "" && v != "0" {
		if SIMD() != "scalar" {
			t.Fatalf("PDQ_NOSIMD=%s but %s loops in use", v, SIMD())
		}
		return
	}
	if got, want := SIMD(), loopSets[len(loopSets)-1].name; got != want {
		t.Fatalf("%s loops in use, want the fastest, %s", got, want)
	}
	// Set by scripts/avx2-emu.sh, which runs the tests on an emulated CPU without AVX-512: a run
	// that fell back to other loops would pass without testing what it is for.
	if want := os.Getenv("PDQ_WANT_SIMD"); want != "" && SIMD() != want {
		t.Fatalf("%s loops in use, PDQ_WANT_SIMD=%s", SIMD(), want)
	}
}

func TestFirstNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	run := func(t *testing.T) {
		for trial := range 200 {
			x := adversarial(r, r.IntN(10000), 0.1)
			want := -1
			if trial%3 != 0 && len(x) > 0 {
				for k := range 1 + r.IntN(3) {
					i := r.IntN(len(x))
					x[i] = [...]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[k%3]
				}
				want = firstNonFinite(x)
			}
			if got := FirstNonFinite(x); got != want {
				t.Fatalf("trial %d: %d, want %d", trial, got, want)
			}
		}
	}
	withEverySet(t, run)
}

// TestSIMDEncodeE4M3Sweep compares the FP8 encoders over a million float32 bit patterns spread
// across the whole range (every sign, exponent and rounding case).
func TestSIMDEncodeE4M3Sweep(t *testing.T) {
	x := make([]float32, 0, 1<<20)
	for b := uint64(0); b < 1<<32; b += 4093 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	withSIMD(t, func(t *testing.T, set *loopSet) {
		c1, c2 := make([]byte, len(x)), make([]byte, len(x))
		set.encodeE4M3(c1, x, 1)
		encodeE4M3Scalar(c2, x, 1)
		for i := range c1 {
			if c1[i] != c2[i] {
				t.Fatalf("%#08x: %#02x, want %#02x", math.Float32bits(x[i]), c1[i], c2[i])
			}
		}
	})
}
