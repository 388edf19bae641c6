package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

// The batched searches leave a clamp of level out of a candidate's error where no lane of the
// batch needs it (clamps_simd.go): the one at -8 where every lane that tries the candidate has
// a·(1/s) ≤ 8.5, the one at 7 where a·(1/s) < 7.5. Random groups seldom sit at those bounds,
// and a wrong clamp only shows when it changes a choice of the search (the packing always
// clamps), so these tests build batches at the edge: in each, one lane whose candidate needs the
// clamp, with a group on which leaving the clamp out would change the scalar result (checked
// with clampSkipLoops, a model of such a mistake), beside lanes that do not need it (or do not
// try the candidate), some with their extreme exactly at -8.5·s (a rounding tie) and levels
// exactly -8. They fail when a bound moves by 0.05% or a lane's mask bit is dropped.

// The edge candidates. bf16(a·kClampLo) is 1/8.5 of a rounded either way, so a·(1/s) lies
// either side of 8.5 with the mantissa of a. With kClampHi, just below 1/7.5, a lane either
// repeats the RTN scale (and skips the candidate) or gets the BF16 value below it, a·(1/s) just
// above 7.5. (No lane that tries a candidate has a·(1/s) within 0.19% above 7.5: s would round
// to the RTN scale. So no input tells a bound of 7.5 from 7.51.) Each comes with a rival tried
// after it (a·(1/s) near 8 and 7, needing no clamp), whose error can fall between the edge
// candidate's errors with and without the clamp.
var (
	kClampLo = float32(1 / 8.5)
	kClampHi = float32(0.99609375 / 7.5)
)

// edgeParams returns the parameters of groups of g whose plain and coarse weighted candidates
// are the edge multipliers and their rivals (the fuzz targets' edge mode).
func edgeParams(t testing.TB, g int) *Int4Params {
	p := mustParams(t, g, SearchMSE, false)
	withEdgeCandidates(p)
	return p
}

// withEdgeCandidates makes the edge multipliers and their rivals p's plain and coarse weighted
// candidates.
func withEdgeCandidates(p *Int4Params) {
	p.Pos = []float32{kClampLo, 1.0 / 8, kClampHi, 1.0 / 7}
	p.WPos = p.Pos
	p.posPad = nil // the vector candidate generation wants NewInt4Params's grid
}

// levelSkip is level leaving out the clamp at -8 unless lo and the one at 7 unless hi; the
// rounding trick is exact here, as clampSkipLoops uses it only for |v| < 9.
func levelSkip(v float32, lo, hi bool) float32 {
	if lo && v < -8 {
		v = -8
	}
	if hi && v > 7 {
		v = 7
	}
	return (v + rne) - rne
}

// clampSkipLoops returns the scalar loops with the weighted sums of the levels x·inv (wSums) taken
// without the clamp at -8 where a·inv ≤ loMax and without the one at 7 where a·inv < hiMax, a the
// group's absolute maximum, as a batched loop would take a candidate's error with those bounds.
// With unit weights the weighted search gives the plain search's bytes, so the model stands for
// both. With loMax 8.5 and hiMax 7.5 it must give the scalar loops' sums (TestClampSkipModel);
// with larger bounds it is the mistake the edge groups must expose. It also changes the
// refinement's sums, which the batched loops always clamp: for the edge groups that only widens
// what counts as a mistake.
func clampSkipLoops(loMax, hiMax float32) *loopSet {
	set := scalarLoops
	set.name = "clamp-skip-model"
	clamps := func(x []float32, inv float32) (lo, hi bool) {
		ai := math.Float32frombits(absMaxBits(x)) * inv
		return !(ai <= loMax), !(ai < hiMax)
	}
	set.wSums = func(x, w []float32, s, inv float32, div bool) (e, xq, qq float32) {
		if div {
			return wSums(x, w, s, inv, true)
		}
		lo, hi := clamps(x, inv)
		var el, xl, ql [8]float32
		for i, v := range x {
			q := levelSkip(v*inv, lo, hi)
			dd := v - float32(q*s)
			el[i&7] += float32(w[i] * float32(dd*dd))
			xl[i&7] += float32(float32(w[i]*v) * q)
			ql[i&7] += float32(float32(w[i]*q) * q)
		}
		return lanes(el[0], el[1], el[2], el[3], el[4], el[5], el[6], el[7]),
			lanes(xl[0], xl[1], xl[2], xl[3], xl[4], xl[5], xl[6], xl[7]),
			lanes(ql[0], ql[1], ql[2], ql[3], ql[4], ql[5], ql[6], ql[7])
	}
	return &set
}

// TestClampSkipBounds checks the rounding half of clamps_simd.go's argument on every float32 it
// concerns: rne(f) equals level(f) for every f in [-8.5, -8) and (7, 7.5), and not beyond.
func TestClampSkipBounds(t *testing.T) {
	rint := func(f float32) float32 { return float32(math.RoundToEven(float64(f))) }
	n := 0
	for f := float32(-8.5); f < -8; f = math.Nextafter32(f, 0) {
		if rint(f) != level(f) {
			t.Fatalf("rne(%v) = %v, level %v", f, rint(f), level(f))
		}
		n++
	}
	for f := math.Nextafter32(7, 8); f < 7.5; f = math.Nextafter32(f, 8) {
		if rint(f) != level(f) {
			t.Fatalf("rne(%v) = %v, level %v", f, rint(f), level(f))
		}
		n++
	}
	if below, above := math.Nextafter32(-8.5, -9), float32(7.5); rint(below) == level(below) || rint(above) == level(above) {
		t.Fatalf("the bounds are not tight: rne(%v) = %v, rne(%v) = %v", below, rint(below), above, rint(above))
	}
	t.Logf("%d values", n)
}

// TestClampSkipModel: with the bounds of clamps_simd.go the model's sums are the scalar loops'
// bit for bit, on the edge groups and on mixed ones, for every candidate of search.
func TestClampSkipModel(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	model := clampSkipLoops(8.5, 7.5)
	for trial := range 400 {
		g := []int{8, 32, 64, 128}[r.IntN(4)]
		k := edgeKind(r.IntN(int(edgeKinds)))
		p := edgeParams(t, g)
		var x []float32
		if trial%2 == 0 {
			x, _ = edgeGroup(r, g, k, nil, p)
		} else {
			x = mixedSlab(r, 1, g, g, false)
			p = mustParams(t, g, SearchMSE, false)
		}
		w := mixedWeights(r, g, g, false)
		a := math.Float32frombits(absMaxBits(x))
		if a == 0 || a >= 0x1p100 || a < TinyAbsMax {
			continue
		}
		sR := floatcodec.RoundBF16(a / 7.5)
		for _, s := range candidates(nil, x, a, sR, p) {
			e1, x1, q1 := wSums(x, w, s, 1/s, false)
			e2, x2, q2 := model.wSums(x, w, s, 1/s, false)
			if !bitsEq(e1, e2) || !bitsEq(x1, x2) || !bitsEq(q1, q2) {
				t.Fatalf("trial %d, scale %v (a·inv %v): the model's sums %v %v %v, the scalar loops' %v %v %v",
					trial, s, a*(1/s), e2, x2, q2, e1, x1, q1)
			}
		}
	}
}

// edgeKind is the role of a group in an edge batch.
type edgeKind int

const (
	loSafe    edgeKind = iota // kClampLo: a·(1/s) ≤ 8.5; levels exactly -8, the extreme often at the tie -8.5
	loNeeds                   // kClampLo: a·(1/s) in (8.5, 8.6) (or 8.504), so that x·(1/s) falls below -8.5
	hiSkip                    // kClampHi repeats the RTN scale: the lane does not try it
	hiNeeds                   // kClampHi: a·(1/s) in [7.5, 7.6), so that x·(1/s) reaches 7.5
	edgeKinds                 // the number of kinds
)

// edgeGroup returns g values of the kind k: their absolute maximum a (negative for the lo kinds,
// positive for the hi ones, often several times) has an edge multiplier's candidate s where k
// wants it. For loNeeds and hiNeeds with sens set, the group is one whose result the mistaken
// model sens changes (with column weights w when w is non-nil); ok reports whether one was
// found.
func edgeGroup(r *rand.Rand, g int, k edgeKind, w []float32, p *Int4Params) (x []float32, ok bool) {
	e := r.IntN(40) - 25
	loTop := [...]float32{8.6, 8.504}[r.IntN(2)] // half the loNeeds groups within 0.05% of the bound
	var a, s float32
	for {
		a = float32(math.Ldexp(1+r.Float64(), e))
		if k == loSafe && r.IntN(3) == 0 {
			a = float32(math.Ldexp(8.5, e-3)) // s = 2^(e-3) and a·(1/s) = 8.5 exactly
		}
		sR := floatcodec.RoundBF16(a / 7.5)
		mult := kClampLo
		if k >= hiSkip {
			mult = kClampHi
		}
		s = floatcodec.RoundBF16(a * mult)
		ai := a * (1 / s)
		if k == loSafe && ai <= 8.5 || k == loNeeds && ai > 8.5 && ai < loTop ||
			k == hiSkip && s == sR || k == hiNeeds && s != sR && ai >= 7.5 && ai < 7.6 {
			break
		}
	}
	ext := -a
	if k >= hiSkip {
		ext = a
	}
	x = make([]float32, g)
	if k == loNeeds || k == hiNeeds {
		// Several extremes, the others on the candidate's own levels near 0 but a few: the
		// candidate and its rival are then near the best, and the levels of the extremes weigh.
		m, noise, lv := 1+r.IntN(g/4), r.IntN(3), 1+r.IntN(4)
		for i := range x {
			switch {
			case i < m:
				x[i] = ext
			case i < m+noise:
				x[i] = float32(2*r.Float64()-1) * a
			default:
				x[i] = float32(r.IntN(2*lv+1)-lv) * s
			}
		}
		r.Shuffle(g, func(i, j int) { x[i], x[j] = x[j], x[i] })
		return x, sensitive(x, w, p, loTop)
	}
	for i := range x {
		switch r.IntN(8) {
		case 0:
			x[i] = ext
		case 1:
			if 8*s <= a {
				x[i] = -8 * s // level -8 exactly, when 1/s is exact
			}
		case 2:
			x[i] = (float32(r.IntN(15)-7) + 0.5) * s // ties
		default:
			x[i] = float32(2*r.Float64()-1) * a
		}
	}
	x[r.IntN(g)] = ext
	return x, true
}

// sensitive reports whether leaving out the clamp a lane needs (loNeeds, hiNeeds: the model with
// bounds loTop and 7.6, just above 8.5 and 7.5) changes the result of the one group x, with
// column weights w (nil: unit weights, the plain search's bytes).
func sensitive(x, w []float32, p *Int4Params, loTop float32) bool {
	if w == nil {
		w = make([]float32, len(x))
		for i := range w {
			w[i] = 1
		}
	}
	prev := lp
	defer func() { lp = prev }()
	lp = &scalarLoops
	want := quantSlabWeighted(x, 1, len(x), p, w)
	lp = clampSkipLoops(loTop, 7.6)
	return sameSlab(quantSlabWeighted(x, 1, len(x), p, w), want) != ""
}

// edgeSlab returns nb batches of sixteen groups of g for the parameters edgeParams(g) (column
// weights d when non-nil, one row): batch b has a group of kind loNeeds (hiNeeds) in lane b%16
// and groups of kind loSafe (hiSkip) in the others, so that only that lane needs the clamp for
// the edge candidate.
func edgeSlab(t testing.TB, r *rand.Rand, g, nb int, d []float32, p *Int4Params, hi bool) []float32 {
	needs, safe := loNeeds, loSafe
	if hi {
		needs, safe = hiNeeds, hiSkip
	}
	x := make([]float32, 0, nb*16*g)
	for b := range nb {
		for l := range 16 {
			k := len(x) / g
			var w []float32
			if d != nil {
				w = d[k*g : (k+1)*g]
			}
			if l != b%16 {
				grp, _ := edgeGroup(r, g, safe, w, p)
				x = append(x, grp...)
				continue
			}
			for try := 0; ; try++ {
				if w != nil {
					// Weights without zero, subnormal or huge columns, drawn anew each try, all
					// equal in a quarter of the tries (the plain candidates).
					u := r.IntN(4) == 0
					for i := range w {
						w[i] = float32(math.Exp(r.NormFloat64()))
						if u && i > 0 {
							w[i] = w[0]
						}
					}
				}
				if try == 2000 {
					t.Fatalf("g=%d: no group of kind %d that leaving out its clamp changes in %d tries", g, needs, try)
				}
				if grp, ok := edgeGroup(r, g, needs, w, p); ok {
					x = append(x, grp...)
					break
				}
			}
		}
	}
	return x
}

func TestSIMDBatchSearchClampEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	for _, g := range []int{32, 64, 128} {
		for _, hi := range []bool{false, true} {
			p := edgeParams(t, g)
			for _, refine := range []int{0, 3} {
				p.Refine = refine
				x := edgeSlab(t, r, g, 32, nil, p, hi)
				compareSlabSets(t, x, 1, len(x), p)
			}
		}
	}
}

func TestSIMDBatchWeightedClampEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	for _, g := range []int{32, 64, 128} {
		for _, hi := range []bool{false, true} {
			p := edgeParams(t, g)
			const nb = 32
			// Column weights: most groups unequal (the coarse and fine candidates), some all
			// equal (the plain ones).
			d := mixedWeights(r, nb*16*g, g, false)
			for c0 := 0; c0 < len(d); c0 += g {
				if r.IntN(4) == 0 {
					for i := range g {
						d[c0+i] = 1.5
					}
				}
			}
			x := edgeSlab(t, r, g, nb, d, p, hi)
			var want slabOut
			withEverySet(t, func(t *testing.T) {
				for _, off := range []bool{false, true} {
					noBatchSearch = off
					got := quantSlabWeighted(x, 1, len(x), p, d)
					noBatchSearch = false
					if lp == &scalarLoops && !off {
						want = got
						continue
					}
					if msg := sameSlab(got, want); msg != "" {
						t.Fatalf("g=%d hi %v per-group %v: %s", g, hi, off, msg)
					}
				}
			})
		}
	}
}

// edgeSeed returns an edge slab's bytes for the fuzz targets' corpus.
func edgeSeed(t testing.TB, g int, hi bool) []byte {
	r := rand.New(rand.NewPCG(67, 68))
	x := edgeSlab(t, r, g, 2, nil, edgeParams(t, g), hi)
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}
