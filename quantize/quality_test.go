package quantize

import (
	"context"
	"math"
	"testing"

	"pdq/quantize/qref"
	"pdq/safetensors"
)

// TestQuality checks the acceptance bands on QUALITY.md's synthetic data (a quarter of the
// 4096×4096 tensor, which moves the figures by under 0.02 dB; cmd/qualitytable measures the
// whole): rtn within ±0.03 dB of the table, mse within 0.02 dB of an exhaustive 400-point search
// with refinement and at least the table's best positive scale minus 0.03 dB, FP8 block at
// least 31.4 dB.
func TestQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 4M-weight tensors")
	}
	const rows, cols = 1024, 4096
	ctx := context.Background()
	for i, c := range qref.Columns {
		w := qref.Synthetic(c.Dist, rows, cols, qref.Sigma, qref.Seed)
		measure := func(opt Int4Options) (float64, *Int4Result) {
			r, err := QuantizeInt4(ctx, w, rows, cols, opt)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(w))
			if err := DequantizeInt4(got, r.Packed, r.Scales, safetensors.BF16, rows, cols, r.GroupSize); err != nil {
				t.Fatal(err)
			}
			var m Metrics
			m.Add(w, got, 0)
			if d := math.Abs(m.SQNR() - r.SQNR()); d > 1e-3 {
				t.Errorf("%v: SQNR from the written bytes %.4f, from the quantizer's sums %.4f", c, m.SQNR(), r.SQNR())
			}
			return m.SQNR(), r
		}
		rtn, _ := measure(Int4Options{GroupSize: c.Group, Method: MethodRTN})
		mse, res := measure(Int4Options{GroupSize: c.Group})
		ref := qref.Exhaustive(qref.RMin(c.Group), false).SQNR(w, c.Group)
		t.Logf("%s g%d: rtn %.3f (table %.2f)  mse %.3f (table %.2f, exhaustive %.3f, rtn by mse %.3f)",
			c.Dist, c.Group, rtn, qref.TableRTN[i], mse, qref.TableBest[i], ref, res.RTNSQNR())
		if math.Abs(rtn-qref.TableRTN[i]) > 0.03 {
			t.Errorf("%s g%d: rtn %.3f dB, table %.2f", c.Dist, c.Group, rtn, qref.TableRTN[i])
		}
		if mse < ref-0.02 || mse < qref.TableBest[i]-0.03 {
			t.Errorf("%s g%d: mse %.3f dB, exhaustive %.3f, table best %.2f", c.Dist, c.Group, mse, ref, qref.TableBest[i])
		}
		if math.Abs(res.RTNSQNR()-rtn) > 1e-3 {
			t.Errorf("%s g%d: RTNSQNR %.4f, rtn measured %.4f", c.Dist, c.Group, res.RTNSQNR(), rtn)
		}
		if c.Group == 32 {
			f, err := QuantizeFP8Block(ctx, w, rows, cols, FP8Options{Workers: 0})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(w))
			if err := DequantizeFP8Block(got, f.Data, f.ScaleInv, rows, cols); err != nil {
				t.Fatal(err)
			}
			var m Metrics
			m.Add(w, got, 0)
			t.Logf("%s FP8 block: %.3f dB (table %.2f)", c.Dist, m.SQNR(), qref.TableFP8[i])
			if m.SQNR() < 31.4 {
				t.Errorf("%s FP8 block: %.3f dB < 31.4", c.Dist, m.SQNR())
			}
		}
	}
}
