package kernels

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The sixteen-group RTN quantizer (rtn16_avx512.go) must write what the per-group loops write.
// mixedSlab's groups rarely put their elements on the rounding ties of their own scale; here
// every group's maximum is 7.5·s for a BF16 s, so that the RTN scale is s exactly and the
// elements can sit on the ties (k+0.5)·s, one float32 step either side, on the clip edge 7.5·s,
// or be zero, subnormal or tiny.

// tieGroup returns g values whose RTN scale is s (a BF16 value) with most elements on or next
// to a rounding tie.
func tieGroup(r *rand.Rand, g int, s float32) []float32 {
	x := make([]float32, g)
	for i := range x {
		v := (float32(r.IntN(16)-8) + 0.5) * s
		switch r.IntN(6) {
		case 0:
			v = math.Nextafter32(v, 0)
		case 1:
			v = math.Nextafter32(v, float32(math.Inf(1)))
		case 2:
			v = [...]float32{0, float32(math.Copysign(0, -1)), 1e-45, -7.5 * s, 7 * s, -8 * s}[r.IntN(6)]
		}
		if v > 7.5*s || v < -7.5*s {
			v = 7.5 * s
		}
		x[i] = v
	}
	x[r.IntN(g)] = [...]float32{7.5, -7.5}[r.IntN(2)] * s
	return x
}

func TestSIMDRTNBatchTies(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for trial := range 60 {
		g := []int{16, 32, 48, 64, 128, 256}[r.IntN(6)]
		rows, cols := 1+r.IntN(12), g*(1+r.IntN(6))
		x := make([]float32, 0, rows*cols)
		for len(x) < rows*cols {
			// Scales across the range: BF16 values from subnormal to near the float32 maximum.
			s := math.Float32frombits(uint32(r.IntN(0x7e00)+0x0040) << 16)
			if trial%3 == 0 {
				s = math.Float32frombits(uint32(0x3c00+r.IntN(0x200)) << 16)
			}
			x = append(x, tieGroup(r, g, s)...)
		}
		p := mustParams(t, g, SearchRTN, trial%2 == 0)
		compareSlabSets(t, x, rows, cols, p)
	}
}

// compareSlabSets quantizes x with every loop set, with and without the batched loops, and
// compares every byte, every statistic and the error with the scalar loops'.
func compareSlabSets(t *testing.T, x []float32, rows, cols int, p *Int4Params) {
	t.Helper()
	var want slabOut
	withEverySet(t, func(t *testing.T) {
		for _, off := range []bool{false, true} {
			noBatchSearch = off
			got := quantSlab(x, rows, cols, p)
			noBatchSearch = false
			if lp == &scalarLoops && !off {
				want = got
				continue
			}
			var nf1, nf2 *NonFiniteError
			if errors.As(got.err, &nf1) != errors.As(want.err, &nf2) || nf1 != nil && (nf1.Index != nf2.Index || math.Float32bits(nf1.Value) != math.Float32bits(nf2.Value)) {
				t.Fatalf("g=%d per-group %v: error %v, want %v", p.GroupSize, off, got.err, want.err)
			}
			if want.err == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("g=%d %d×%d per-group %v: output differs from the scalar loops", p.GroupSize, rows, cols, off)
			}
		}
	})
}

// FuzzSIMDRTNBatch compares the RTN quantizer of every loop set with the scalar loops on
// fuzzer-chosen bits (NaN and ±Inf included) in slabs of at least sixteen groups of 16, 32, 64
// or 128.
func FuzzSIMDRTNBatch(f *testing.F) {
	seed := make([]byte, 4*32*16)
	for i := range 32 * 16 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits((float32(i%17)-8+0.5)*0x1p-4))
	}
	f.Add(seed, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, gsel uint8) {
		g := []int{16, 32, 64, 128}[gsel%4]
		n := len(data) / 4 / g * g
		if n < 16*g {
			return
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		compareSlabSets(t, x, 1, n, mustParams(t, g, SearchRTN, false))
	})
}

// TestSIMDRTNBatchScaleTies gives every group a maximum whose quotient by 7.5 sits on a BF16
// rounding tie of either parity or one float32 step either side of one, so that the batch's
// own scale rounding (round to nearest even on the bit pattern) is checked against the scalar
// one where the two ways of rounding part.
func TestSIMDRTNBatchScaleTies(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	var maxima []float32
	for len(maxima) < 64 {
		hi := uint32(0x0080 + r.IntN(0x7e00))
		want := hi<<16 | [...]uint32{0x7fff, 0x8000, 0x8001}[r.IntN(3)]
		a := float32(float64(math.Float32frombits(want)) * 7.5)
		for d := -4; d <= 4; d++ {
			c := math.Float32frombits(math.Float32bits(a) + uint32(d))
			if math.Float32bits(c/7.5) == want && !math.IsInf(float64(c), 0) {
				maxima = append(maxima, c)
				break
			}
		}
	}
	for _, g := range []int{16, 32, 64} {
		x := make([]float32, 0, len(maxima)*g)
		for _, a := range maxima {
			grp := make([]float32, g)
			for i := range grp {
				grp[i] = a * float32(r.Float64()*2-1)
			}
			grp[r.IntN(g)] = a * float32(1-2*r.IntN(2))
			x = append(x, grp...)
		}
		compareSlabSets(t, x, 1, len(x), mustParams(t, g, SearchRTN, false))
	}
}
