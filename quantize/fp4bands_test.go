package quantize

import (
	"context"
	"errors"
	"testing"
)

// TestFP4Bands: a slab quantized in bands of any cut (a short last one included) holds
// QuantizeFP4's bytes and figures for the whole slab, adds Metrics.AddFP4's error bit for bit,
// and DequantizeFP4 reads the bytes back to the values AddFP4 measured.
func TestFP4Bands(t *testing.T) {
	const rows, cols = 40, 256
	w := testWeights(rows, cols)
	ctx := context.Background()
	for _, f := range []PackedFormat{PackedNVFP4, PackedMXFP4} {
		for _, m := range []Method{MethodRTN, MethodMSE} {
			whole, err := QuantizeFP4(ctx, w, rows, cols, FP4Options{Format: f, Method: m, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			var want Metrics
			if err := want.AddFP4(w, whole, 7); err != nil {
				t.Fatal(err)
			}
			var b FP4Bands
			var res FP4Result
			for _, cut := range [][]int{{rows}, {16, 16, 8}, {1, 13, 26}} {
				if err := b.Begin(&res, rows, cols, FP4Options{Format: f, Method: m, Global: whole.Global}); err != nil {
					t.Fatal(err)
				}
				r0 := 0
				for _, n := range cut {
					if err := b.Add(ctx, w[r0*cols:(r0+n)*cols], n); err != nil {
						t.Fatal(err)
					}
					r0 += n
				}
				var got Metrics
				if err := b.End(&got, 7); err != nil {
					t.Fatal(err)
				}
				if string(res.Packed) != string(whole.Packed) || string(res.Scales) != string(whole.Scales) || res.Global != whole.Global ||
					res.SumSq != whole.SumSq || res.SumSqErr != whole.SumSqErr || res.RTNSumSqErr != whole.RTNSumSqErr || res.Clipped != whole.Clipped {
					t.Fatalf("%s %s bands %v: result differs from the whole slab's", f, m, cut)
				}
				if got != want {
					t.Fatalf("%s %s bands %v: metrics %+v, want %+v", f, m, cut, got, want)
				}
			}
			deq := make([]float32, len(w))
			if err := DequantizeFP4(deq, f, res.Packed, res.Scales, res.Global, rows, cols); err != nil {
				t.Fatal(err)
			}
			var m2 Metrics
			m2.Add(w, deq, 7)
			if m2 != want {
				t.Fatalf("%s %s: dequantized bytes measure %+v, AddFP4 %+v", f, m, m2, want)
			}
		}
	}
}

// TestFP4BandsErrors: an incomplete slab, a band past the end, a missing NVFP4 global scale and
// a bad method are refused.
func TestFP4BandsErrors(t *testing.T) {
	var b FP4Bands
	var res FP4Result
	ctx := context.Background()
	w := testWeights(4, 64)
	if err := b.Begin(&res, 4, 64, FP4Options{Format: PackedNVFP4}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("no global scale: %v", err)
	}
	if err := b.Begin(&res, 4, 64, FP4Options{Format: PackedMXFP4, Method: "gptq"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad method: %v", err)
	}
	if err := b.Begin(&res, 4, 48, FP4Options{Format: PackedMXFP4}); !errors.Is(err, ErrBadShape) {
		t.Fatalf("48 columns in groups of 32: %v", err)
	}
	if err := b.Begin(&res, 4, 64, FP4Options{Format: PackedMXFP4}); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, w[:2*64], 2); err != nil {
		t.Fatal(err)
	}
	var m Metrics
	if err := b.End(&m, 0); !errors.Is(err, ErrBadShape) {
		t.Fatalf("End after 2 of 4 rows: %v", err)
	}
	if err := b.Add(ctx, w, 4); !errors.Is(err, ErrBadShape) {
		t.Fatalf("band past the end: %v", err)
	}
}
