package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

// TestWeightedUnitWeights: with every weight 1 the weighted search performs the same float32
// operations as the plain one, so the bytes and statistics are identical (signed scales too).
func TestWeightedUnitWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rows, cols := 64, 256
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 0.02)
		if i%97 == 0 {
			src[i] *= 8
		}
	}
	ones := make([]float32, cols)
	for i := range ones {
		ones[i] = 1
	}
	for _, g := range []int{32, 128} {
		for _, signed := range []bool{false, true} {
			p, err := NewInt4Params(g, SearchMSE, signed)
			if err != nil {
				t.Fatal(err)
			}
			mk := func() Int4Out {
				n := rows * cols
				return Int4Out{Packed: make([]byte, n/2), Scales: make([]byte, 2*n/g), Stats: make([]GroupStats, n/g)}
			}
			a, b := mk(), mk()
			if err := (CPU{}).QuantizeInt4(a, src, rows, cols, &p); err != nil {
				t.Fatal(err)
			}
			if err := (CPU{}).QuantizeInt4Weighted(b, src, rows, cols, &p, ones); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Packed, b.Packed) || !bytes.Equal(a.Scales, b.Scales) {
				t.Errorf("g%d signed=%v: weighted search with unit weights differs from the plain search", g, signed)
			}
			for i := range a.Stats {
				if a.Stats[i] != b.Stats[i] {
					t.Fatalf("g%d signed=%v: group %d stats %+v vs %+v", g, signed, i, a.Stats[i], b.Stats[i])
				}
			}
		}
	}
}

// TestWeightedBadInput: length errors and non-finite input are reported like QuantizeInt4's.
func TestWeightedBadInput(t *testing.T) {
	p, _ := NewInt4Params(32, SearchMSE, false)
	src := make([]float32, 64)
	out := Int4Out{Packed: make([]byte, 32), Scales: make([]byte, 4), Stats: make([]GroupStats, 2)}
	if err := (CPU{}).QuantizeInt4Weighted(out, src, 1, 64, &p, make([]float32, 32)); err == nil {
		t.Error("short weights accepted")
	}
	src[40] = float32(math.Inf(1))
	err := (CPU{}).QuantizeInt4Weighted(out, src, 1, 64, &p, make([]float32, 64))
	if nf, ok := err.(*NonFiniteError); !ok || nf.Index != 40 {
		t.Errorf("Inf at 40: %v", err)
	}
}

// TestWeightedNeverWorseThanRTN: with strongly unequal weights (the two-stage search), every
// group's weighted error is at most that of the RTN scale bf16(absmax/7.5) (float64 sums, to
// float32 rounding), and the search beats RTN overall.
func TestWeightedNeverWorseThanRTN(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rows, cols := 32, 512
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 0.02)
	}
	d := make([]float32, cols)
	for j := range d {
		d[j] = float32(math.Exp(2 * rng.NormFloat64()))
	}
	for _, g := range []int{32, 128, 512} {
		p, err := NewInt4Params(g, SearchMSE, false)
		if err != nil {
			t.Fatal(err)
		}
		n := rows * cols
		out := Int4Out{Packed: make([]byte, n/2), Scales: make([]byte, 2*n/g), Stats: make([]GroupStats, n/g)}
		if err := (CPU{}).QuantizeInt4Weighted(out, src, rows, cols, &p, d); err != nil {
			t.Fatal(err)
		}
		var sumS, sumR float64
		for k := range n / g {
			x := src[k*g : (k+1)*g]
			w := d[(k*g)%cols : (k*g)%cols+g]
			var a float32
			for _, v := range x {
				a = max(a, float32(math.Abs(float64(v))))
			}
			s := math.Float32frombits(uint32(binary.LittleEndian.Uint16(out.Scales[2*k:])) << 16)
			es, er := weightedErr64(x, w, s), weightedErr64(x, w, floatcodec.RoundBF16(a/7.5))
			if es > er*(1+1e-5) {
				t.Fatalf("g%d group %d: weighted error %g with scale %g, RTN %g", g, k, es, s, er)
			}
			sumS, sumR = sumS+es, sumR+er
		}
		if !(sumS < sumR) {
			t.Errorf("g%d: weighted search error %g, RTN %g", g, sumS, sumR)
		}
	}
}

func weightedErr64(x, w []float32, s float32) float64 {
	var e float64
	for j, v := range x {
		q := math.RoundToEven(min(max(float64(v)/float64(s), -8), 7))
		dd := float64(v) - q*float64(s)
		e += float64(w[j]) * dd * dd
	}
	return e
}
