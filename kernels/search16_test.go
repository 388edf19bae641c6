package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The sixteen-group search and pack (search16_avx512.go) must give what the per-group loops
// give. These tests quantize whole slabs, whose groups mix every kind search treats apart
// (ordinary, all zero, tiny, huge, ties and clamp edges, non-finite), with the scalar set, the
// fastest set and the fastest set with the batched search off, and compare every byte.

// slabOut is the whole output of one QuantizeInt4 call.
type slabOut struct {
	packed, scales []byte
	stats          []uint32 // the stats' bits, so that NaN sums compare equal to themselves
	err            error
}

func quantSlab(x []float32, rows, cols int, p *Int4Params) slabOut {
	ng := rows * cols / p.GroupSize
	out := Int4Out{Packed: make([]byte, rows*cols/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
	err := (CPU{}).QuantizeInt4(out, x, rows, cols, p)
	r := slabOut{packed: out.Packed, scales: out.Scales, err: err}
	for _, st := range out.Stats {
		r.stats = append(r.stats, math.Float32bits(st.SumSq), math.Float32bits(st.Err), math.Float32bits(st.RTNErr), uint32(st.Clipped))
	}
	return r
}

// mixedSlab returns rows×cols values whose groups of g are of a random kind each.
func mixedSlab(r *rand.Rand, rows, cols, g int, nonFinite bool) []float32 {
	x := make([]float32, 0, rows*cols)
	for len(x) < rows*cols {
		s := float32(math.Ldexp(1+r.Float64(), r.IntN(40)-30))
		grp := adversarial(r, g, s)
		switch r.IntN(10) {
		case 0:
			clear(grp)
		case 1: // below TinyAbsMax, or scales rounding to zero
			for i := range grp {
				grp[i] = float32(r.NormFloat64()) * 0x1p-70
			}
		case 2:
			for i := range grp {
				grp[i] = float32(r.NormFloat64()) * 1e37
			}
		case 3:
			if nonFinite {
				grp[r.IntN(g)] = [...]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[r.IntN(3)]
			}
		case 4, 5: // ordinary Gaussian weights with an outlier
			for i := range grp {
				grp[i] = float32(r.NormFloat64()) * 0.02
			}
			grp[r.IntN(g)] *= 10
		}
		x = append(x, grp...)
	}
	return x
}

func TestSIMDBatchSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 120 {
		g := []int{8, 16, 32, 64, 128, 256}[r.IntN(6)]
		cols := g * (1 + r.IntN(5))
		rows := 1 + r.IntN(40)
		nonFinite := trial%4 == 3
		x := mixedSlab(r, rows, cols, g, nonFinite)
		p := mustParams(t, g, Search(trial%3%2), false) // RTN in a third of the trials
		if trial%5 == 0 {
			p.Refine = r.IntN(6)
		}
		compareSlabSets(t, x, rows, cols, p)
	}
}

// FuzzSIMDBatchSearch compares the quantizer of every SIMD loop set (the batched searches: eight
// groups at a time on AVX2, sixteen on AVX-512) with the scalar loops on fuzzer-chosen bits, NaN
// and ±Inf included, in slabs of groups of 32, 64 or 128 (whole batches and a tail of single
// groups), for both searches, signed scales (which the batches leave to the per-group loops)
// and refinement counts 0 to 4, with the candidates at the bounds where the batches leave a
// clamp out (withEdgeCandidates) in some runs. mode: bits 0-1 the group size, bit 2 MSE, bit 3
// signed, bits 4-6 the refinements, bit 7 the edge candidates.
func FuzzSIMDBatchSearch(f *testing.F) {
	seed := make([]byte, 4*128*17) // 68 groups of 32, 34 of 64, 17 of 128: batches and a tail
	for i := range len(seed) / 4 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i%37-18)*0.03125))
	}
	f.Add(seed, uint8(3<<4|1<<2))
	f.Add(seed, uint8(1<<4|1<<2|1))
	f.Add(seed, uint8(2<<4|1<<2|2))
	f.Add(seed, uint8(3<<4|1<<3|1<<2))
	f.Add(seed[:4*32*16], uint8(0))
	f.Add(edgeSeed(f, 32, false), uint8(1<<7|3<<4|1<<2))
	f.Add(edgeSeed(f, 64, true), uint8(1<<7|1<<2|1))
	f.Add(edgeSeed(f, 128, false), uint8(1<<7|1<<2|2))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		g := []int{32, 64, 128, 32}[mode&3]
		n := len(data) / 4 / g * g
		if n == 0 {
			return
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		p := mustParams(t, g, Search(mode>>2&1), mode&8 != 0)
		p.Refine = int(mode >> 4 & 7 % 5)
		if mode&(1<<7) != 0 {
			withEdgeCandidates(p)
		}
		prev := lp
		defer func() { lp = prev }()
		lp = &scalarLoops
		want := quantSlab(x, 1, n, p)
		for _, set := range loopSets[1:] {
			lp = set
			got := quantSlab(x, 1, n, p)
			if (got.err == nil) != (want.err == nil) || got.err != nil && got.err.Error() != want.err.Error() {
				t.Fatalf("%s: error %v, want %v", set.name, got.err, want.err)
			}
			if want.err == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, g=%d: output differs from the scalar loops", set.name, g)
			}
		}
	})
}
