package kernels

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

// The batched searches (eight groups on AVX2, search8_avx2.go; sixteen on AVX-512,
// search16_avx512.go) turn every choice of search into a lane mask, and a candidate must
// replace the best only when its error is strictly smaller. Random groups almost never give two
// candidates the same error, so candTieGroup builds groups that do, exactly, and
// TestSIMDBatchSearchErrorTies checks that every set makes the scalar choice on them.

// tieUnit is the grid of candTieGroup's values: with the group maximum 1 the scales tried are
// BF16 values near 1/8, multiples of 2^-11, so that errors of most groups are exact sums of
// integers times tieUnit².
const tieUnit = 0x1p-12

// candTieGroup returns g values, the largest magnitude 1, on which two scales search tries one
// after the other (the RTN scale or a candidate, then the next candidate) have exactly the same
// error, the first being the best so far; or nil when the balancing did not reach a tie.
func candTieGroup(r *rand.Rand, g int, p *Int4Params) []float32 {
	x := make([]float32, g)
	x[0] = 1
	for i := 1; i < g; i++ {
		x[i] = float32(math.Round(max(-4095, min(4095, r.NormFloat64()*1500)))) * tieUnit
	}
	sR := floatcodec.RoundBF16(1 / 7.5)
	seq := append([]float32{sR}, candidates(make([]float32, 0, 2*maxCandidates), x, 1, sR, p)...)
	i := r.IntN(len(seq) - 1)
	s1, s2 := seq[i], seq[i+1]
	errOf := func(s float32) float64 {
		if s == sR {
			return float64(errDiv(x, s))
		}
		return float64(errMul(x, s, 1/s))
	}
	lvl := func(v, s float32) float32 {
		if s == sR {
			return level(v / s)
		}
		return level(v * (1 / s))
	}
	d := errOf(s1) - errOf(s2)
	for range 50 * g {
		if d == 0 {
			break
		}
		// Moving an element of level q (under both scales) by one unit changes d by about
		// 2q(s2−s1)/tieUnit units²: step it towards d = 0.
		k := 1 + r.IntN(g-1)
		q := lvl(x[k], s1)
		if q == 0 || lvl(x[k], s2) != q {
			continue
		}
		old := x[k]
		if (d > 0) == (q*(s2-s1) > 0) {
			x[k] -= tieUnit
		} else {
			x[k] += tieUnit
		}
		if nd := errOf(s1) - errOf(s2); math.Abs(nd) < math.Abs(d) && x[k] > -1 && x[k] < 1 && lvl(x[k], s1) == q && lvl(x[k], s2) == q {
			d = nd
		} else {
			x[k] = old
		}
	}
	if d != 0 || searchErrorTies(x, p) == 0 {
		return nil
	}
	return x
}

// searchErrorTies returns how often search, with the scalar loops, finds a candidate whose
// error equals the best so far.
func searchErrorTies(x []float32, p *Int4Params) int {
	a := math.Float32frombits(absMaxBits(x))
	sR := floatcodec.RoundBF16(a / 7.5)
	bestE := errDiv(x, sR)
	n := 0
	for _, s := range candidates(make([]float32, 0, 2*maxCandidates), x, a, sR, p) {
		e := errMul(x, s, 1/s)
		if e == bestE {
			n++
		}
		bestE = min(bestE, e)
	}
	return n
}

func TestSIMDBatchSearchErrorTies(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, g := range []int{32, 64, 128} {
		p := mustParams(t, g, SearchMSE, false)
		const want = 24 // tie groups per slab: three batches of eight, one and a half of sixteen
		var x []float32
		tries := 0
		for len(x) < want*g && tries < 100*want {
			tries++
			if grp := candTieGroup(r, g, p); grp != nil {
				// Scaled by a power of two, the group keeps its ties (the scales and errors
				// scale exactly) and the slab spans magnitudes.
				sc := float32(math.Ldexp(1, r.IntN(60)-30))
				for i := range grp {
					grp[i] *= sc
				}
				if searchErrorTies(grp, p) == 0 {
					t.Fatalf("g=%d: a tie group scaled by %g has no tie", g, sc)
				}
				x = append(x, grp...)
			}
		}
		if len(x) < want*g {
			t.Fatalf("g=%d: %d tie groups in %d tries, want %d", g, len(x)/g, tries, want)
		}
		t.Logf("g=%d: %d tie groups in %d tries", g, want, tries)
		compareSlabSets(t, x, 3, want/3*g, p)
	}
}

// TestSIMDBatchSearchTakes checks that each SIMD set's batched quantizer takes the whole
// batches of a slab (eight groups on AVX2, sixteen on AVX-512) for RTN and for SearchMSE with
// unsigned scales, so that the comparisons of the batched and per-group loops with the scalar
// ones compare the batches and not the per-group loops twice, and that their bytes are the
// scalar loops'; the search with signed scales is left to the per-group loops.
func TestSIMDBatchSearchTakes(t *testing.T) {
	const rows, cols = 3, 9 * 128 // 27 groups of 128, 108 of 32
	x := goldenInput(rows, cols)
	for _, c := range []struct {
		g      int
		search Search
	}{{32, SearchMSE}, {64, SearchMSE}, {128, SearchMSE}, {32, SearchRTN}, {128, SearchRTN}} {
		g := c.g
		p := mustParams(t, g, c.search, false)
		ng := rows * cols / g
		prev := lp
		lp = &scalarLoops
		want := quantSlab(x, rows, cols, p)
		lp = prev
		withSIMD(t, func(t *testing.T, set *loopSet) {
			out := Int4Out{Packed: make([]byte, rows*cols/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
			done, err := callQuantBatches(out, x, ng, p)
			if err != nil {
				t.Fatal(err)
			}
			if batch := map[string]int{"avx2": 8, "avx512": 16}[set.name]; done != ng/batch*batch {
				t.Fatalf("g=%d search %d: the batches quantized %d groups of %d, want %d", g, c.search, done, ng, ng/batch*batch)
			}
			if done == 0 || !bytes.Equal(out.Packed[:done*g/2], want.packed[:done*g/2]) || !bytes.Equal(out.Scales[:2*done], want.scales[:2*done]) {
				t.Fatalf("g=%d: the batches' bytes differ from the scalar loops'", g)
			}
			if c.search == SearchMSE {
				if done, _ := callQuantBatches(out, x, ng, mustParams(t, g, SearchMSE, true)); done != 0 {
					t.Fatalf("g=%d: the batches quantized %d groups with signed scales", g, done)
				}
			}
		})
	}
}

// TestSIMDBatchSearchNoAllocations: the batched search allocates nothing on any set.
func TestSIMDBatchSearchNoAllocations(t *testing.T) {
	x := goldenInput(16, 1024)
	for _, g := range []int{32, 128} {
		p := mustParams(t, g, SearchMSE, false)
		ng := len(x) / g
		out := Int4Out{make([]byte, len(x)/2), make([]byte, 2*ng), make([]GroupStats, ng)}
		withEverySet(t, func(t *testing.T) {
			if n := testing.AllocsPerRun(5, func() { (CPU{}).QuantizeInt4(out, x, 16, 1024, p) }); n != 0 {
				t.Errorf("QuantizeInt4 g%d on %s: %v allocations", g, lp.name, n)
			}
		})
	}
}

// TestSIMDRTNBatchSubnormalScales: when the RTN scale is subnormal, its rounding to BF16 can
// be coarse (relative error up to a half), so |x/s| may exceed 8.5 and the clamp at -8 and the
// clip count of the negative side act, which the batched RTN loops only run for batches that
// have such a scale. Groups whose maximum is subnormal, with their negative extreme, on every
// set; some batches mix them with ordinary groups.
func TestSIMDRTNBatchSubnormalScales(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, g := range []int{16, 32, 40, 64, 128} {
		const ng = 48
		x := make([]float32, 0, ng*g)
		for k := range ng {
			grp := make([]float32, g)
			a := float32(math.Ldexp(1+r.Float64(), -(128 + r.IntN(20)))) // 2^-147 .. 2^-127
			if k%5 == 4 {
				a = float32(r.NormFloat64()) // an ordinary group in the batch
			}
			for i := range grp {
				grp[i] = a * float32(2*r.Float64()-1)
			}
			grp[r.IntN(g)] = -a
			if r.IntN(2) == 0 {
				grp[r.IntN(g)] = a
			}
			x = append(x, grp...)
		}
		compareSlabSets(t, x, 1, ng*g, mustParams(t, g, SearchRTN, false))
	}
}
