package kernels

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
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
