package quantize

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randCuts returns the starts of consecutive bands cutting rows at random, every cut on a
// multiple of unit rows.
func randCuts(r *rand.Rand, rows, unit int) []int {
	cuts := []int{0}
	for a := 0; a < rows; {
		a = min(rows, a+unit*(1+r.IntN(3)))
		cuts = append(cuts, a)
	}
	return cuts
}

// TestInt4BandsAsWhole: a slab quantized band by band (Int4Bands, random cuts, reused storage)
// gives the bytes, the sums and the metrics of QuantizeInt4Into and AddInt4 over the whole slab, bit for
// bit, also with rows of widely different scales (whose float64 sums round, so that their order
// shows); an error reports its row in the tensor (FirstRow); a slab ended early is refused.
func TestInt4BandsAsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	var dst, want Int4Result
	var b Int4Bands
	for _, tc := range measuredCases {
		w := randWeights(uint64(tc.rows*tc.cols), tc.rows*tc.cols, true)
		for round := range 3 {
			if round == 2 { // rows scaled from 2^-20 to 2^20: sums that round show their order
				for i := range w {
					w[i] = float32(math.Ldexp(float64(w[i]), 7*(i/max(tc.cols, 1))%41-20))
				}
			}
			o := tc.opt
			o.Workers = 1
			var wantM, gotM Metrics
			if err := QuantizeInt4Into(context.Background(), &want, w, tc.rows, tc.cols, o); err != nil {
				t.Fatal(err)
			}
			if err := wantM.AddInt4(w, &want, 77); err != nil {
				t.Fatal(err)
			}
			cuts := randCuts(r, tc.rows, 1)
			if err := b.Begin(&dst, tc.rows, tc.cols, o); err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(cuts); i++ {
				if err := b.Add(context.Background(), w[cuts[i-1]*tc.cols:cuts[i]*tc.cols], cuts[i]-cuts[i-1]); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.End(&gotM, 77); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%dx%d %+v round %d cuts %v", tc.rows, tc.cols, o, round, cuts)
			if !bytes.Equal(dst.Packed, want.Packed) || !bytes.Equal(dst.Scales, want.Scales) ||
				dst.SumSq != want.SumSq || dst.SumSqErr != want.SumSqErr || dst.RTNSumSqErr != want.RTNSumSqErr || dst.Clipped != want.Clipped {
				t.Fatalf("%s: result differs from the whole slab's", name)
			}
			if gotM != wantM {
				t.Fatalf("%s: metrics %+v, want %+v", name, gotM, wantM)
			}
		}
	}

	w := randWeights(5, 8*64, false)
	w[5*64+3] = float32(math.NaN())
	if err := b.Begin(&dst, 8, 64, Int4Options{GroupSize: 32, Method: MethodRTN, FirstRow: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(context.Background(), w[:4*64], 4); err != nil {
		t.Fatal(err)
	}
	err := b.Add(context.Background(), w[4*64:], 4)
	if want := "element 64323 (row 1005, column 3)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NaN in the second band: got %v, want an error at %s", err, want)
	}
	if err := b.Begin(&dst, 8, 64, Int4Options{GroupSize: 32, Method: MethodRTN}); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(context.Background(), w[:4*64], 4); err != nil {
		t.Fatal(err)
	}
	if err := b.End(new(Metrics), 0); err == nil {
		t.Error("End after 4 of 8 rows succeeded")
	}
	if err := b.Add(context.Background(), w[:5*64], 5); err == nil {
		t.Error("a band past the slab's rows was taken")
	}
}

// TestFP8BandsAsWhole: a slab quantized band by band of block rows (FP8Bands) and measured band
// by band (Measure) gives the bytes of QuantizeFP8Block and the metrics of Metrics.Add against
// its dequantization over the whole slab; a band off a block row is refused.
func TestFP8BandsAsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	var dst, want FP8Result
	var b FP8Bands
	for _, tc := range []struct{ rows, cols int }{{300, 1024}, {128, 200}, {700, 130}, {1, 64}, {0, 128}} {
		w := randWeights(uint64(tc.rows+tc.cols), tc.rows*tc.cols, true)
		q, err := QuantizeFP8Block(context.Background(), w, tc.rows, tc.cols, FP8Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		want = *q
		deq := make([]float32, len(w))
		if err := DequantizeFP8Block(deq, want.Data, want.ScaleInv, tc.rows, tc.cols); err != nil {
			t.Fatal(err)
		}
		var wantM Metrics
		wantM.Add(w, deq, 9)
		for round := range 3 {
			cuts := randCuts(r, tc.rows, 128)
			if err := b.Begin(&dst, tc.rows, tc.cols, FP8Options{}); err != nil {
				t.Fatal(err)
			}
			var m Measure
			for i := 1; i < len(cuts); i++ {
				vals := w[cuts[i-1]*tc.cols : cuts[i]*tc.cols]
				q, err := b.Add(context.Background(), vals, cuts[i]-cuts[i-1])
				if err != nil {
					t.Fatal(err)
				}
				if err := m.AddFP8Block(vals, q); err != nil {
					t.Fatal(err)
				}
			}
			var gotM Metrics
			m.MergeInto(&gotM, 9)
			name := fmt.Sprintf("%dx%d round %d cuts %v", tc.rows, tc.cols, round, cuts)
			if !bytes.Equal(dst.Data, want.Data) || fmt.Sprint(dst.ScaleInv) != fmt.Sprint(want.ScaleInv) {
				t.Fatalf("%s: result differs from the whole slab's", name)
			}
			if gotM != wantM {
				t.Fatalf("%s: metrics %+v, want %+v", name, gotM, wantM)
			}
		}
	}
	w := randWeights(1, 256*64, false)
	if err := b.Begin(&dst, 256, 64, FP8Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(context.Background(), w[:64*64], 64); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(context.Background(), w[64*64:128*64], 64); err == nil {
		t.Error("a band starting off a block row was taken")
	}
}

// TestMeasureAsAdd: a slice measured piece by piece at random cuts (Measure) gives the metrics
// of Metrics.Add over the whole slice, bit for bit.
func TestMeasureAsAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, n := range []int{0, 1, 7, 8, 9, 255, 256, 257, 1000, 5000} {
		ref := randWeights(uint64(n), n, true)
		got := make([]float32, n)
		for i, v := range ref {
			got[i] = v + float32(r.NormFloat64())*1e-3
		}
		var want Metrics
		want.Add(ref, got, 5)
		for round := range 5 {
			var m Measure
			for a := 0; a < n; {
				c := min(n, a+r.IntN(300))
				m.Add(ref[a:c], got[a:c])
				a = c
			}
			var gotM Metrics
			m.MergeInto(&gotM, 5)
			if gotM != want {
				t.Fatalf("n=%d round %d: %+v, want %+v", n, round, gotM, want)
			}
		}
	}
}
