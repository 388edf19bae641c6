package quantize

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"pdq/kernels"
	"pdq/safetensors"
)

// TestQuantizeFP4 checks QuantizeFP4 against the kernels it runs: the same bytes for any number
// of workers and for rows quantized apart, figures that are the sums of the group statistics,
// an SQNR equal to the measured one of the written bytes, and bytes that the source decoder
// reads back to the same values.
func TestQuantizeFP4(t *testing.T) {
	const rows, cols = 48, 512
	w := testWeights(rows, cols)
	ctx := context.Background()
	for _, f := range []PackedFormat{PackedNVFP4, PackedMXFP4} {
		for _, m := range []Method{MethodRTN, MethodMSE} {
			r1, err := QuantizeFP4(ctx, w, rows, cols, FP4Options{Format: f, Method: m, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			r4, err := QuantizeFP4(ctx, w, rows, cols, FP4Options{Format: f, Method: m, Workers: 4})
			if err != nil {
				t.Fatal(err)
			}
			if string(r1.Packed) != string(r4.Packed) || string(r1.Scales) != string(r4.Scales) || r1.SumSqErr != r4.SumSqErr || r1.Global != r4.Global {
				t.Fatalf("%s %s: results differ between 1 and 4 workers", f, m)
			}
			// Rows apart, under the whole tensor's global scale.
			top, err := QuantizeFP4(ctx, w[:8*cols], 8, cols, FP4Options{Format: f, Method: m, Global: r1.Global})
			if err != nil {
				t.Fatal(err)
			}
			if string(top.Packed) != string(r1.Packed[:8*cols/2]) || string(top.Scales) != string(r1.Scales[:8*cols/r1.GroupSize]) {
				t.Fatalf("%s %s: the first rows alone differ from the whole", f, m)
			}
			// The figures are the written bytes'.
			var met Metrics
			if err := met.AddFP4(w, r1, 0); err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(met.SQNR() - r1.SQNR()); d > 1e-3 {
				t.Errorf("%s %s: SQNR of the bytes %.4f, from the sums %.4f", f, m, met.SQNR(), r1.SQNR())
			}
			if m == MethodRTN && r1.SumSqErr != r1.RTNSumSqErr || r1.SumSqErr > r1.RTNSumSqErr {
				t.Errorf("%s %s: error %g, RTN error %g", f, m, r1.SumSqErr, r1.RTNSumSqErr)
			}
			// The source decoder reads them back.
			sdt := safetensors.U8
			if f == PackedNVFP4 {
				sdt = safetensors.F8E4M3
			}
			l, err := InspectFP4(f, meta(safetensors.U8, rows, cols/2), meta(sdt, rows, int64(cols/r1.GroupSize)), meta(safetensors.F32, 1))
			if err != nil {
				t.Fatal(err)
			}
			got, want := make([]float32, len(w)), make([]float32, len(w))
			if err := l.Decode(got, rows, PackedSlab{Packed: r1.Packed, Scales: r1.Scales, Scale: r1.Global}); err != nil {
				t.Fatal(err)
			}
			if err := kernels.DequantizeFP4(want, r1.Packed, r1.GroupScales(nil), rows, cols, r1.GroupSize); err != nil {
				t.Fatal(err)
			}
			var m2 Metrics
			m2.Add(w, got, 0)
			if m2 != met {
				t.Errorf("%s %s: decoded bytes measure %+v, AddFP4 %+v", f, m, m2, met)
			}
		}
	}
}

func TestNVFP4Global(t *testing.T) {
	gate, up := []float32{0.5, -1.3125}, []float32{0.25, 1}
	g, err := NVFP4Global(gate, up)
	if err != nil || g != 2048 {
		t.Fatalf("NVFP4Global = %v, %v; want 2048 (448·6/1.3125)", g, err)
	}
	if g, _ := NVFP4Global(up); g != 2688 {
		t.Fatalf("NVFP4Global(up) = %v, want 2688", g)
	}
	if _, err := NVFP4Global(gate, []float32{float32(math.Inf(1))}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("Inf: %v", err)
	}
}

func TestQuantizeFP4Errors(t *testing.T) {
	ctx := context.Background()
	w := make([]float32, 2*64)
	cases := []struct {
		name string
		opt  FP4Options
		cols int
		want error
	}{
		{"no format", FP4Options{}, 64, ErrInvalidOptions},
		{"INT4 format", FP4Options{Format: PackedInt4}, 64, ErrInvalidOptions},
		{"method", FP4Options{Format: PackedMXFP4, Method: "best"}, 64, ErrInvalidOptions},
		{"mxfp4 columns", FP4Options{Format: PackedMXFP4}, 16, ErrBadShape},
		{"global", FP4Options{Format: PackedNVFP4, Global: float32(math.Inf(1))}, 64, ErrInvalidOptions},
	}
	for _, c := range cases {
		if _, err := QuantizeFP4(ctx, w[:2*c.cols], 2, c.cols, c.opt); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	w[64+5] = float32(math.NaN())
	for _, opt := range []FP4Options{{Format: PackedNVFP4, FirstRow: 10}, {Format: PackedMXFP4, FirstRow: 10}} {
		_, err := QuantizeFP4(ctx, w, 2, 64, opt)
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 11, column 5") {
			t.Errorf("%s: NaN at row 11 of the tensor: %v", opt.Format, err)
		}
	}
}
