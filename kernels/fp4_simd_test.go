package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// fp4Variant is a loop set as the FP4 tests run it: the AVX-512 and AVX2 sets twice, with the
// assembly and with the Go vector code alone.
type fp4Variant struct {
	name  string
	set   *loopSet
	noAsm bool
}

// fp4Variants lists the loop sets after the scalar one, the vector sets also without the
// assembly.
func fp4Variants() []fp4Variant {
	var v []fp4Variant
	for _, set := range loopSets[1:] {
		v = append(v, fp4Variant{set.name, set, false})
		if set.name == "avx512" || set.name == "avx2" {
			v = append(v, fp4Variant{set.name + "-go", set, true})
		}
	}
	return v
}

// fp4AllSets quantizes x (rows×cols) with every loop set and fails on the first output that
// differs from the scalar one's, bytes or statistics.
func fp4AllSets(t *testing.T, x []float32, rows, cols int, g float32) {
	t.Helper()
	prev := lp
	defer func() { lp, fp4NoAsm = prev, false }()
	type result struct {
		nv, mx FP4Out
		deq    []float32
		sums   ErrSums
	}
	run := func() (r [2]result) {
		for i, s := range []Search{SearchRTN, SearchMSE} {
			r[i].nv, r[i].mx = newFP4Out(rows, cols, 16), newFP4Out(rows, cols, 32)
			if err := QuantizeNVFP4(r[i].nv, x, rows, cols, g, s); err != nil {
				t.Fatal(err)
			}
			if cols%32 == 0 {
				if err := QuantizeMXFP4(r[i].mx, x, rows, cols, s); err != nil {
					t.Fatal(err)
				}
			}
			sc := make([]float32, len(r[i].nv.Scales))
			NVFP4Scales(sc, r[i].nv.Scales, g)
			r[i].deq = make([]float32, len(x))
			if err := DequantizeFP4(r[i].deq, r[i].nv.Packed, sc, rows, cols, 16); err != nil {
				t.Fatal(err)
			}
			var err error
			if r[i].sums, err = (CPU{}).ErrorSumsFP4(x, r[i].nv.Packed, sc, rows, cols, 16, 3); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	lp = loopSets[0]
	want := run()
	for _, o := range []FP4Out{want[1].nv, want[1].mx} {
		for k, st := range o.Stats {
			if math.Float32bits(st.Err) > math.Float32bits(st.RTNErr) || st.Clipped < 0 || int(st.Clipped) > len(x) {
				t.Fatalf("mse group %d: %+v", k, st)
			}
		}
	}
	for _, v := range fp4Variants() {
		lp, fp4NoAsm = v.set, v.noAsm
		got := run()
		fp4NoAsm = false
		set := v
		for i := range got {
			for j := range got[i].deq {
				if math.Float32bits(got[i].deq[j]) != math.Float32bits(want[i].deq[j]) {
					t.Fatalf("%s, search %d: DequantizeFP4 element %d: %v, scalar %v", set.name, i, j, got[i].deq[j], want[i].deq[j])
				}
			}
			if a, b := got[i].sums, want[i].sums; a != b && !(a.SumSqErr != a.SumSqErr && b.SumSqErr != b.SumSqErr) {
				t.Fatalf("%s, search %d: ErrorSumsFP4 %+v, scalar %+v", set.name, i, a, b)
			}
			for _, p := range [][2]FP4Out{{got[i].nv, want[i].nv}, {got[i].mx, want[i].mx}} {
				a, b := p[0], p[1]
				if string(a.Packed) != string(b.Packed) || string(a.Scales) != string(b.Scales) {
					t.Fatalf("%s, search %d: bytes differ from the scalar loops", set.name, i)
				}
				for k := range a.Stats {
					if !sameStats(a.Stats[k], b.Stats[k]) {
						t.Fatalf("%s, search %d, group %d: stats %+v, scalar %+v", set.name, i, k, a.Stats[k], b.Stats[k])
					}
				}
			}
		}
	}
}

// TestSIMDFP4 compares every loop set with the scalar one on data that reaches the corners:
// ratios on and next to the E2M1 midpoints and the BF16 rounding boundaries, zero and tiny
// groups, subnormal and huge values.
func TestSIMDFP4(t *testing.T) {
	const rows, cols = 16, 256
	rng := rand.New(rand.NewPCG(7, 8))
	x := goldenInput(rows, cols)
	fp4AllSets(t, x, rows, cols, NVFP4GlobalScale(maxAbs(x)))
	// Hand-worked ratios: with the RTN scale 0.125 (the extreme at 0.75) every element is 8x
	// its ratio; put ratios on, just below and just above every midpoint.
	mids := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 5.5, 6.5, 7}
	for i := range x {
		if i%16 == 0 {
			x[i] = 0.75
			continue
		}
		m := mids[rng.IntN(len(mids))] / 8
		b := math.Float32bits(m) + uint32(rng.IntN(5)) - 2
		if rng.IntN(2) == 0 { // on or next to a BF16 rounding tie of the ratio, either parity
			b = math.Float32bits(m)&^0xffff + uint32(rng.IntN(8))<<16 - 4<<16 + 0x8000 + uint32(rng.IntN(3)) - 1
		}
		x[i] = math.Float32frombits(b)
		if rng.IntN(2) == 0 {
			x[i] = -x[i]
		}
	}
	fp4AllSets(t, x, rows, cols, NVFP4GlobalScale(1.3125))
	for i := range x {
		switch rng.IntN(6) {
		case 0:
			x[i] = 0
		case 1:
			x[i] = math.Float32frombits(rng.Uint32() & 0x807fffff) // subnormal
		case 2:
			x[i] = float32(rng.NormFloat64()) * 1e30
		default:
			x[i] = float32(rng.NormFloat64()) * 0.02
		}
	}
	clear(x[32:64])
	fp4AllSets(t, x, rows, cols, NVFP4GlobalScale(maxAbs(x)))
	fp4AllSets(t, x, rows, cols, NVFP4MinGlobal)
	fp4AllSets(t, x, rows, cols, NVFP4MaxGlobal)
}

// FuzzSIMDFP4 compares every loop set with the scalar one on arbitrary finite weights and
// global scales, and checks that no searched group ends worse than its RTN error. The weights
// are repeated to fill whole batches, so the batched loops (and their assembly) run on them.
func FuzzSIMDFP4(f *testing.F) {
	seed := make([]byte, 4*64)
	for i := range 64 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits((float32(i)-32)*0.03125))
	}
	f.Add(seed, float32(2048))
	f.Add(make([]byte, 128), float32(1))
	f.Fuzz(func(t *testing.T, data []byte, g float32) {
		n := len(data) / 4 / 32 * 32
		if n == 0 || !(g >= NVFP4MinGlobal && g <= NVFP4MaxGlobal) {
			return
		}
		// The input, then again 1024 elements of it (every other copy negated): whole batches
		// of sixteen groups of both formats, then the groups after them.
		x := make([]float32, n+1024)
		for i := range x {
			j := i % n
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
			if v != v || math.IsInf(float64(v), 0) {
				v = 0
			}
			if i/n%2 == 1 {
				v = -v
			}
			x[i] = v
		}
		fp4AllSets(t, x, 1, len(x), g)
	})
}
