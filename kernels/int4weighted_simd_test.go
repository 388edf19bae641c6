package kernels

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"pdq/internal/floatcodec"
)

// The batched weighted search (int4weighted_avx512.go) must give what searchWeighted gives one
// group at a time. These tests quantize whole slabs with the scalar loops, every other loop set,
// and every set with the batched search off, and compare every byte and statistic bit.

// quantSlabWeighted is quantSlab for QuantizeInt4Weighted with column weights d.
func quantSlabWeighted(x []float32, rows, cols int, p *Int4Params, d []float32) slabOut {
	ng := rows * cols / p.GroupSize
	out := Int4Out{Packed: make([]byte, rows*cols/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
	err := (CPU{}).QuantizeInt4Weighted(out, x, rows, cols, p, d)
	r := slabOut{packed: out.Packed, scales: out.Scales, err: err}
	for _, st := range out.Stats {
		r.stats = append(r.stats, math.Float32bits(st.SumSq), math.Float32bits(st.Err), math.Float32bits(st.RTNErr), uint32(st.Clipped))
	}
	return r
}

// mixedWeights returns cols column weights whose groups of g are of a random kind each:
// log-normal of a random spread, with zeros, all equal (one or another value), all zero, ties,
// subnormal, huge (products overflow), and with nonFinite NaN or ±Inf, which the kernels do not
// reject (quantize does) and which must then still give the scalar loops' result.
func mixedWeights(r *rand.Rand, cols, g int, nonFinite bool) []float32 {
	d := make([]float32, cols)
	for c0 := 0; c0 < cols; c0 += g {
		w := d[c0 : c0+g]
		sigma := []float64{0.5, 1, 1.5, 2, 3}[r.IntN(5)]
		for i := range w {
			w[i] = float32(math.Exp(sigma * r.NormFloat64()))
		}
		switch r.IntN(12) {
		case 0:
			for i := range w {
				w[i] = 1
			}
		case 1:
			v := float32(math.Exp(r.NormFloat64()))
			for i := range w {
				w[i] = v
			}
		case 2:
			clear(w)
		case 3: // some zero columns
			for i := range w {
				if r.IntN(3) == 0 {
					w[i] = 0
				}
			}
		case 4: // two values only: ties between candidates' errors
			for i := range w {
				w[i] = float32(1 + r.IntN(2))
			}
		case 5:
			for i := range w {
				w[i] = math.Float32frombits(1 + r.Uint32N(0x7fffff))
			}
		case 6:
			for i := range w {
				w[i] *= 1e35
			}
		case 7: // all equal but one
			for i := range w {
				w[i] = 2
			}
			w[r.IntN(g)] = 3
		case 8:
			if nonFinite {
				w[r.IntN(g)] = [...]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[r.IntN(3)]
			}
		}
	}
	return d
}

// rtnTies fills grp with exact ties of the RTN levels x/sR (sR the group's RTN scale) and their
// float32 neighbours, where x/sR and x·(1/sR) may round to different levels.
func rtnTies(r *rand.Rand, grp []float32) {
	a := float32(math.Ldexp(1+r.Float64(), r.IntN(20)-10))
	sR := floatcodec.RoundBF16(a / 7.5)
	for i := range grp {
		v := (float32(r.IntN(15)-7) + 0.5) * sR
		v = [...]float32{v, math.Nextafter32(v, 0), math.Nextafter32(v, 2*v)}[r.IntN(3)]
		if v > a || v < -a {
			v = 0
		}
		grp[i] = v
	}
	grp[r.IntN(len(grp))] = a
}

// sameSlab reports where got differs from the scalar loops' want, or "".
func sameSlab(got, want slabOut) string {
	var nf1, nf2 *NonFiniteError
	if errors.As(got.err, &nf1) != errors.As(want.err, &nf2) || nf1 != nil && (nf1.Index != nf2.Index || math.Float32bits(nf1.Value) != math.Float32bits(nf2.Value)) ||
		(got.err == nil) != (want.err == nil) {
		return "error " + errString(got.err) + ", want " + errString(want.err)
	}
	if want.err == nil && !reflect.DeepEqual(got, want) {
		return "output differs from the scalar loops"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func TestSIMDBatchWeighted(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for trial := range 200 {
		g := []int{8, 16, 32, 32, 64, 128, 256}[r.IntN(7)]
		cols := g * (1 + r.IntN(40)) // rows of any number of groups: batches that wrap a row
		rows := 1 + r.IntN(24)
		nonFinite := trial%5 == 4
		x := mixedSlab(r, rows, cols, g, nonFinite && r.IntN(2) == 0)
		for k := 0; k < len(x); k += g {
			if r.IntN(4) == 0 {
				rtnTies(r, x[k:k+g])
			}
		}
		d := mixedWeights(r, cols, g, nonFinite)
		search := SearchMSE
		if trial%10 == 9 {
			search = SearchRTN
		}
		p := mustParams(t, g, search, trial%13 == 12)
		switch trial % 7 {
		case 1:
			p.Refine = r.IntN(6)
		case 2:
			p.WFineN = r.IntN(5)
		case 3:
			p.WPos = nil // the plain candidates for every group
		}
		var want slabOut
		withEverySet(t, func(t *testing.T) {
			for _, off := range []bool{false, true} {
				noBatchSearch = off
				got := quantSlabWeighted(x, rows, cols, p, d)
				noBatchSearch = false
				if lp == &scalarLoops && !off {
					want = got
					continue
				}
				if msg := sameSlab(got, want); msg != "" {
					t.Fatalf("trial %d (g=%d, %d×%d, per-group %v): %s", trial, g, rows, cols, off, msg)
				}
			}
		})
	}
}

// FuzzSIMDWeighted compares the weighted quantizer of every SIMD loop set (AVX2's batches of
// eight groups, AVX-512's of sixteen) with the scalar loops on fuzzer-chosen values (any bits,
// NaN and ±Inf included) and weights; mode picks the group size (32, 64 or 128), the groups per
// row, uniform or zeroed weights, the refinements (bits 9-13) and the candidates at the bounds
// where the batches leave a clamp out (bit 15, withEdgeCandidates).
func FuzzSIMDWeighted(f *testing.F) {
	seed := make([]byte, 4*32*16)
	for i := range 32 * 16 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i%37-18)*0.03125))
	}
	wseed := make([]byte, 4*32)
	for i := range 32 {
		binary.LittleEndian.PutUint32(wseed[4*i:], math.Float32bits(float32(1+i%5)))
	}
	f.Add(seed, wseed, uint16(0))
	f.Add(seed, wseed, uint16(0x1ff))
	f.Add(seed, []byte{0, 0, 0x80, 0x3f}, uint16(3<<2))
	f.Add(edgeSeed(f, 32, false), wseed, uint16(1<<15|3<<9|1<<7))
	f.Add(edgeSeed(f, 32, true), wseed, uint16(1<<15|1<<7|5<<2))
	f.Add(edgeSeed(f, 128, false), wseed, uint16(1<<15|1<<7|2))
	f.Fuzz(func(t *testing.T, data, wdata []byte, mode uint16) {
		g := []int{32, 64, 128, 32}[mode&3]
		n := len(data) / 4 / g * g
		if n == 0 || len(wdata) < 4 {
			return
		}
		gpr := 1 + int(mode>>2&31)%(n/g) // groups per row, dividing the groups
		for (n/g)%gpr != 0 {
			gpr--
		}
		cols := gpr * g
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		d := make([]float32, cols)
		nw := len(wdata) / 4
		for j := range d {
			d[j] = math.Float32frombits(binary.LittleEndian.Uint32(wdata[4*(j%nw):]))
		}
		switch mode >> 7 & 3 {
		case 1: // every group's weights equal
			for j := range d {
				d[j] = d[j/g*g]
			}
		case 2:
			for j := range d {
				if j%3 == 0 {
					d[j] = 0
				}
			}
		}
		p := mustParams(t, g, SearchMSE, false)
		p.Refine = int(mode >> 9 & 31 % 5)
		if mode&(1<<15) != 0 {
			withEdgeCandidates(p)
		}
		prev := lp
		defer func() { lp = prev }()
		lp = &scalarLoops
		want := quantSlabWeighted(x, n/cols, cols, p, d)
		for _, set := range loopSets[1:] {
			lp = set
			if msg := sameSlab(quantSlabWeighted(x, n/cols, cols, p, d), want); msg != "" {
				t.Fatalf("%s, g=%d, cols=%d: %s", set.name, g, cols, msg)
			}
		}
	})
}

// TestSIMDBatchWeightedTakes checks that each SIMD set's batched weighted search quantizes the
// whole batches of a slab (eight groups on AVX2, sixteen on AVX-512), so that the comparisons
// above compare the batches and not the per-group loops twice, and that they match the scalar
// loops.
func TestSIMDBatchWeightedTakes(t *testing.T) {
	const rows, cols, g = 3, 9 * 32, 32 // 27 groups
	x := goldenInput(rows, cols)
	d := goldenWeights(cols)
	p := mustParams(t, g, SearchMSE, false)
	ng := rows * cols / g
	prev := lp
	lp = &scalarLoops
	want := quantSlabWeighted(x, rows, cols, p, d)
	lp = prev
	withSIMD(t, func(t *testing.T, set *loopSet) {
		out := Int4Out{Packed: make([]byte, rows*cols/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
		done, err := callQuantBatchesWeighted(out, x, ng, cols, p, d)
		if err != nil {
			t.Fatal(err)
		}
		if batch := map[string]int{"avx2": 8, "avx512": 16}[set.name]; done != ng/batch*batch {
			t.Fatalf("the batches quantized %d groups of %d, want %d", done, ng, ng/batch*batch)
		}
		if !reflect.DeepEqual(out.Packed[:done*g/2], want.packed[:done*g/2]) || !reflect.DeepEqual(out.Scales[:2*done], want.scales[:2*done]) {
			t.Fatal("the batches' bytes differ from the scalar loops'")
		}
	})
}

// goldenWeights returns cols column weights from integer arithmetic only: powers of two from
// 2^-4 to 2^4 times 1..31/16, a zero now and then, and the first 32 columns all equal (a group
// that takes the plain candidates).
func goldenWeights(cols int) []float32 {
	d := make([]float32, cols)
	for j := range d {
		h := uint32(j)*0x9e3779b1 ^ uint32(j)>>3
		h ^= h >> 15
		h *= 0x85ebca6b
		h ^= h >> 13
		d[j] = float32(math.Ldexp(float64(16+h>>4%16), int(h%9)-8))
		if h>>12%11 == 0 {
			d[j] = 0
		}
		if j < 32 {
			d[j] = 3
		}
	}
	return d
}

// TestGoldenWeighted pins the exact output of the weighted search (the scalar specification;
// TestSIMDBatchWeighted ties the other loop sets to it, and this test runs under every build of
// make test-simd and every loop set).
func TestGoldenWeighted(t *testing.T) {
	const rows, cols = 64, 512
	x := goldenInput(rows, cols)
	d := goldenWeights(cols)
	for _, c := range []struct {
		name string
		g    int
		want string
	}{
		{"weighted-g32", 32, "54a48791f19f3ed3"},
		{"weighted-g64", 64, "4f11514cd574f169"},
		{"weighted-g128", 128, "f0f0b08af9061c4e"},
	} {
		withEverySet(t, func(t *testing.T) {
			got := quantSlabWeighted(x, rows, cols, mustParams(t, c.g, SearchMSE, false), d)
			if got.err != nil {
				t.Fatal(got.err)
			}
			b := make([]byte, 0, 4*len(got.stats))
			for _, v := range got.stats {
				b = binary.LittleEndian.AppendUint32(b, v)
			}
			if h := hashOf(got.packed, got.scales, b); h != c.want {
				t.Errorf("%s: output hash %s, want %s", c.name, h, c.want)
			}
		})
	}
}
