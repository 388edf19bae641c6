package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/calib"
	"pdq/quantize/report"
	"pdq/quantize/rules"
)

// hostile is a name that clears the screen, sets the window title and forges a line.
const hostile = "w\x1b[2J\x1b]0;pwned\x07\u009b31m\nOK all good"

// noRawControl fails when out holds a byte or rune a terminal would act on (newlines and tabs
// aside).
func noRawControl(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0) {
			t.Fatalf("%s: raw %U reaches the terminal:\n%q", what, r, out)
		}
	}
	if strings.Contains(out, "\nOK all good") {
		t.Fatalf("%s: a name forged a line:\n%s", what, out)
	}
}

// TestInspectEscapesNames: inspect --tensors prints a hostile tensor name escaped.
func TestInspectEscapesNames(t *testing.T) {
	name, _ := json.Marshal(hostile)
	header := fmt.Sprintf(`{%s: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`, name)
	path := rawFile(t, t.TempDir(), "model.safetensors", uint64(len(header)), header, make([]byte, 4))
	out, errOut, code := runMain(t, "inspect", path, "--tensors")
	if code != 0 {
		t.Fatalf("inspect: %s", errOut)
	}
	noRawControl(t, "inspect --tensors", out)
	if !strings.Contains(out, `w\x1b[2J`) {
		t.Fatalf("the name is not shown escaped:\n%s", out)
	}
}

// TestReportEscapesNames: pdq report's table, its threshold failures and convert's summary print
// hostile tensor names and a hostile calibration source escaped.
func TestReportEscapesNames(t *testing.T) {
	_, out, _, _ := convertedFixture(t)
	path := filepath.Join(out, "report.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep *report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for i := range rep.Tensors {
		rep.Tensors[i].Tensor = hostile + fmt.Sprint(i)
	}
	rep.Worst = rep.Tensors[:2]
	rep.Calibration = &report.Calibration{File: "s\x1b[2J", Source: hostile, Method: "gptq", Notes: []string{hostile}}
	hostileJSON, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, hostileJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(path, b, 0o644)
	stdout, stderr, code := runMain(t, "report", out, "--fail-sqnr-below", "1000")
	if code != 1 {
		t.Fatalf("report: status %d: %s", code, stderr)
	}
	noRawControl(t, "report", stdout)
	noRawControl(t, "report's failures", stderr)
	js, _, _ := runMain(t, "report", out, "--json")
	noRawControl(t, "report --json", js)
	var sum bytes.Buffer
	printReportSummary(&sum, rep, out)
	writeNotes(&sum, []string{hostile}, []string{hostile})
	noRawControl(t, "convert's summary", sum.String())
	if err := checkSQNRFloor(rep, 1000); err == nil {
		t.Fatal("no tensor below 1000 dB")
	} else {
		noRawControl(t, "convert's floor", errorLine(nil, err))
	}
}

// TestCalibInspectEscapesSource: calib inspect prints a hostile __metadata__.source escaped.
func TestCalibInspectEscapesSource(t *testing.T) {
	stats := filepath.Join(t.TempDir(), "stats.safetensors")
	mods := []calib.ModuleStats{{Name: "model.layers.0.mlp.down_proj", SqMean: []float32{1, 2, 3, 4}, Tokens: 5}}
	if err := calib.WriteFile(stats, map[string]string{calib.MetaTokens: "5", calib.MetaSource: hostile}, mods); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runMain(t, "calib", "inspect", stats)
	if code != 0 {
		t.Fatalf("calib inspect: %s", errOut)
	}
	noRawControl(t, "calib inspect", out)
}

// TestInspectDenseModelLine: a dense model's line names no "dense first" layers; a mixture of
// experts with dense layers first still does.
func TestInspectDenseModelLine(t *testing.T) {
	for _, tc := range []struct {
		m    rules.ModelSummary
		want string
		not  string
	}{
		{rules.ModelSummary{ModelType: "llama", Hidden: 64, Layers: 4, Vocab: 100}, "hidden 64, 4 layers, vocab 100", "dense first"},
		{rules.ModelSummary{ModelType: "deepseek_v3", Hidden: 64, Layers: 4, DenseLayers: 1, Experts: 8, Vocab: 100}, "4 layers (1 dense first)", "0 dense"},
	} {
		var b bytes.Buffer
		if err := printInspect(&b, inspectReport{Model: tc.m}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) || strings.Contains(b.String(), tc.not) {
			t.Errorf("%s: want %q, not %q:\n%s", tc.m.ModelType, tc.want, tc.not, b.String())
		}
	}
}

// TestFloorListsValuesApart: a tensor just below --fail-sqnr-below is printed with the decimals
// that show it is below (18.4999, not 18.50 next to a floor of 18.50).
func TestFloorListsValuesApart(t *testing.T) {
	for _, tc := range []struct {
		v, floor float64
		want     string
	}{{18.4999, 18.5, "18.4999"}, {17.25, 18.5, "17.25"}, {18.49, 18.5, "18.49"}, {18.4951, 18.5, "18.495"}} {
		if got := belowFloor(tc.v, tc.floor); got != tc.want {
			t.Errorf("belowFloor(%v, %v) = %q, want %q", tc.v, tc.floor, got, tc.want)
		}
	}
	rep := &report.Report{Tensors: []report.TensorReport{{Tensor: "a", Scheme: "int4", SQNR: 18.4999}}}
	if err := checkSQNRFloor(rep, 18.5); err == nil || !strings.Contains(err.Error(), "a  18.4999 dB") {
		t.Fatalf("floor message: %v", err)
	}
}

// TestWorstLinesFit: at 80 columns the worst-tensor lines fit, the numbers first and the name
// shortened keeping its layer and expert; with no terminal the whole name is printed.
func TestWorstLinesFit(t *testing.T) {
	rows := []report.TensorReport{
		{Tensor: "model.layers.61.mlp.experts.255.down_proj.weight_packed", Scheme: "int4", SQNR: 18.38, RelRMSE: 0.1205},
		{Tensor: "model.layers.3.self_attn.o_proj.weight", Scheme: "fp8", SQNR: 30.1, RelRMSE: 0.03},
	}
	for i, l := range worstLines(rows, 80) {
		if cols(l) >= 80 || !strings.HasPrefix(strings.TrimSpace(l), fmt.Sprintf("%.2f dB", float64(rows[i].SQNR))) {
			t.Errorf("80 columns: %q", l)
		}
	}
	if l := worstLines(rows, 80)[0]; !strings.Contains(l, "L61 E255 down_proj") && !strings.Contains(l, "layers.61.mlp.experts.255.down_proj") {
		t.Errorf("80 columns: the layer and expert are lost: %q", l)
	}
	if l := worstLines(rows, 0)[0]; !strings.HasSuffix(l, rows[0].Tensor) {
		t.Errorf("no terminal: %q", l)
	}
}

// TestGroupsFit: at 80 columns convert's per-role table fits, one table per output; with no
// terminal it is the one table verify and report share the columns of.
func TestGroupsFit(t *testing.T) {
	rows := []report.TensorReport{
		{Output: "prefill", Role: "routed_experts", Scheme: "fp8", Tensor: "a", SQNR: 30, RelRMSE: 0.03},
		{Output: "decode", Role: "routed_experts", Scheme: "int4", Tensor: "a", SQNR: 20, RelRMSE: 0.1},
		{Output: "decode", Role: "shared_experts", Scheme: "bf16", Tensor: "b", SQNR: 56, RelRMSE: 0.002},
	}
	r := report.Float(19)
	rows[1].RTNSQNR = &r
	var wide, narrow bytes.Buffer
	writeGroupsFit(&wide, rows, 0)
	writeGroupsFit(&narrow, rows, 80)
	if !strings.Contains(wide.String(), "mean rtn dB") || !strings.Contains(wide.String(), "output") {
		t.Fatalf("no terminal:\n%s", wide.String())
	}
	for _, l := range strings.Split(narrow.String(), "\n") {
		if cols(l) >= 80 {
			t.Errorf("80 columns: %d-column line %q", cols(l), l)
		}
	}
	if !strings.Contains(narrow.String(), "decode:\n") || !strings.Contains(narrow.String(), "mean SQNR dB") {
		t.Fatalf("80 columns:\n%s", narrow.String())
	}
}
