// Command qualitytable measures pdq's quantizers on QUALITY.md's synthetic data (4096×4096,
// σ = 0.02, gauss and Student-t ν=4, values rounded to F16, fixed seed) and prints the measured
// table next to QUALITY.md's reference figures and a plain exhaustive 400-point search.
//
//	go run ./cmd/qualitytable [-rows 4096 -cols 4096 -seed N -check]
//
// With -check it exits with status 1 when a figure is outside its acceptance band: RTN within
// ±0.03 dB of the table, MSE within 0.02 dB of the exhaustive search and no lower than the
// table's best positive scale minus 0.03 dB, FP8 block at least 31.4 dB.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"pdq/quantize"
	"pdq/quantize/qref"
	"pdq/safetensors"
)

func main() {
	rows := flag.Int("rows", qref.Rows, "rows of each synthetic tensor")
	cols := flag.Int("cols", qref.Cols, "columns of each synthetic tensor")
	seed := flag.Uint64("seed", qref.Seed, "generator seed")
	check := flag.Bool("check", false, "exit 1 when a figure is outside its acceptance band")
	flag.Parse()
	ok, err := run(context.Background(), os.Stdout, *rows, *cols, *seed)
	if err != nil {
		slog.Error("qualitytable", "err", err)
		os.Exit(2)
	}
	if *check && !ok {
		os.Exit(1)
	}
}

// measured holds one column's figures (dB).
type measured struct {
	rtn, mse, mseRTN, ref, signed, refSigned, fp8 float64
}

func run(ctx context.Context, w io.Writer, rows, cols int, seed uint64) (bool, error) {
	start := time.Now()
	var m [4]measured
	fp8 := map[qref.Dist]float64{}
	for ci, c := range qref.Columns {
		x := qref.Synthetic(c.Dist, rows, cols, qref.Sigma, seed)
		var err error
		col := &m[ci]
		if col.rtn, _, err = int4(ctx, x, rows, cols, quantize.Int4Options{GroupSize: c.Group, Method: quantize.MethodRTN}); err != nil {
			return false, err
		}
		if col.mse, col.mseRTN, err = int4(ctx, x, rows, cols, quantize.Int4Options{GroupSize: c.Group}); err != nil {
			return false, err
		}
		if col.signed, _, err = int4(ctx, x, rows, cols, quantize.Int4Options{GroupSize: c.Group, SignedScales: true}); err != nil {
			return false, err
		}
		col.ref = qref.Exhaustive(qref.RMin(c.Group), false).SQNR(x, c.Group)
		col.refSigned = qref.Exhaustive(qref.RMin(c.Group), true).SQNR(x, c.Group)
		if _, done := fp8[c.Dist]; !done {
			if fp8[c.Dist], err = fp8Block(ctx, x, rows, cols); err != nil {
				return false, err
			}
		}
		col.fp8 = fp8[c.Dist]
		if c.Group != 32 {
			col.fp8 = math.NaN()
		}
	}

	ok := true
	mark := func(pass bool) string {
		if pass {
			return ""
		}
		ok = false
		return " **FAIL**"
	}
	fmt.Fprintf(w, "Synthetic %d×%d, σ = %g, F16-rounded, seed %d. Cells: measured SQNR in dB (reference; difference).\n\n", rows, cols, qref.Sigma, seed)
	fmt.Fprintf(w, "| method (bits per weight) |")
	for _, c := range qref.Columns {
		fmt.Fprintf(w, " %s g%d |", c.Dist, c.Group)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(qref.Columns)))
	line := func(name string, cell func(i int) string) {
		fmt.Fprintf(w, "| %s |", name)
		for i := range qref.Columns {
			fmt.Fprintf(w, " %s |", cell(i))
		}
		fmt.Fprintln(w)
	}
	line("`rtn`: compressed-tensors rule absmax/7.5 (4.5)", func(i int) string {
		d := m[i].rtn - qref.TableRTN[i]
		return fmt.Sprintf("%.2f (table %.2f; %+.3f)%s", m[i].rtn, qref.TableRTN[i], d, mark(math.Abs(d) <= 0.03))
	})
	line("`mse` (default): search + refinement (4.5)", func(i int) string {
		d := m[i].mse - qref.TableBest[i]
		return fmt.Sprintf("%.2f (table best positive %.2f; %+.3f)%s", m[i].mse, qref.TableBest[i], d, mark(d >= -0.03))
	})
	line("exhaustive 400-point search + refinement (4.5)", func(i int) string {
		return fmt.Sprintf("%.2f (table best positive %.2f; %+.3f)", m[i].ref, qref.TableBest[i], m[i].ref-qref.TableBest[i])
	})
	line("`mse` minus exhaustive search", func(i int) string {
		d := m[i].mse - m[i].ref
		return fmt.Sprintf("%+.3f%s", d, mark(d >= -0.02))
	})
	line("`mse`: what the search bought over `rtn` (same run)", func(i int) string {
		return fmt.Sprintf("%+.2f", m[i].mse-m[i].mseRTN)
	})
	line("`mse` with signed scales, Q4_0-style (4.5)", func(i int) string {
		return fmt.Sprintf("%.2f (table best signed %.2f; %+.3f)", m[i].signed, qref.TableSigned[i], m[i].signed-qref.TableSigned[i])
	})
	line("exhaustive 400-point signed search (4.5)", func(i int) string {
		return fmt.Sprintf("%.2f (table best signed %.2f; %+.3f)", m[i].refSigned, qref.TableSigned[i], m[i].refSigned-qref.TableSigned[i])
	})
	line("FP8 e4m3, 128×128 blocks, absmax/448 (8)", func(i int) string {
		if math.IsNaN(m[i].fp8) {
			return "–"
		}
		return fmt.Sprintf("%.2f (table %.2f; %+.3f)%s", m[i].fp8, qref.TableFP8[i], m[i].fp8-qref.TableFP8[i], mark(m[i].fp8 >= 31.4))
	})
	fmt.Fprintf(w, "\nAcceptance: rtn within ±0.03 dB of the table; mse within 0.02 dB of the exhaustive search and at least the table's best positive scale minus 0.03 dB; FP8 block ≥ 31.4 dB. Result: %s (%.0f s).\n",
		map[bool]string{true: "all pass", false: "FAIL"}[ok], time.Since(start).Seconds())
	return ok, nil
}

// int4 quantizes x and measures the SQNR of the dequantized output (what would be written), and
// the SQNR the reference rule would have reached according to the quantizer.
func int4(ctx context.Context, x []float32, rows, cols int, opt quantize.Int4Options) (sq, rtn float64, err error) {
	res, err := quantize.QuantizeInt4(ctx, x, rows, cols, opt)
	if err != nil {
		return 0, 0, err
	}
	got := make([]float32, len(x))
	if err := quantize.DequantizeInt4(got, res.Packed, res.Scales, safetensors.BF16, rows, cols, res.GroupSize); err != nil {
		return 0, 0, err
	}
	var m quantize.Metrics
	m.Add(x, got, 0)
	return m.SQNR(), res.RTNSQNR(), nil
}

func fp8Block(ctx context.Context, x []float32, rows, cols int) (float64, error) {
	res, err := quantize.QuantizeFP8Block(ctx, x, rows, cols, quantize.FP8Options{Workers: 0})
	if err != nil {
		return 0, err
	}
	got := make([]float32, len(x))
	if err := quantize.DequantizeFP8Block(got, res.Data, res.ScaleInv, rows, cols); err != nil {
		return 0, err
	}
	var m quantize.Metrics
	m.Add(x, got, 0)
	return m.SQNR(), nil
}
