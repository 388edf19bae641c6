package reportview

import (
	"bytes"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/report"
)

// TestTableShowsWeightedSQNR: a calibrated report gets a weighted column; others do not.
func TestTableShowsWeightedSQNR(t *testing.T) {
	rep, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if err := WriteTable(&plain, NewView("r", rep, Query{Top: 5}, Thresholds{})); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "weighted dB") {
		t.Fatal("uncalibrated report shows a weighted column")
	}
	v := report.Float(23.456)
	for i := range rep.Tensors {
		rep.Tensors[i].WeightedSQNR = &v
	}
	var cal bytes.Buffer
	if err := WriteTable(&cal, NewView("r", rep, Query{Top: 5}, Thresholds{})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cal.String(), "weighted dB") || !strings.Contains(cal.String(), "23.46") {
		t.Fatalf("calibrated report lacks the weighted column:\n%s", cal.String())
	}
}

// TestHTMLShowsCalibration: a calibrated report's page names the statistics and methods and
// gets the weighted SQNR, method and entry columns in its sortable table; an uncalibrated one
// has none of them.
func TestHTMLShowsCalibration(t *testing.T) {
	rep, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if err := WriteHTML(&plain, NewView("r", rep, Query{Top: 5}, Thresholds{})); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"weighted dB", `data-key="calib_method"`, "calibration "} {
		if strings.Contains(plain.String(), s) {
			t.Fatalf("uncalibrated page contains %q", s)
		}
	}
	v := report.Float(23.456)
	for i := range rep.Tensors {
		rep.Tensors[i].WeightedSQNR = &v
		rep.Tensors[i].CalibMethod = convert.CalibGPTQ
		rep.Tensors[i].CalibEntry = "model.layers.0.mlp.experts.0.gate_proj"
	}
	rep.Calibration = &report.Calibration{File: "stats.safetensors", Tokens: 1000, Method: convert.CalibGPTQ,
		Source: "tiny", Modules: map[string]int{convert.CalibGPTQ: 3, convert.CalibWeighted: 1}, NoTokens: 2, WeightedSQNR: &v}
	var cal bytes.Buffer
	if err := WriteHTML(&cal, NewView("r", rep, Query{Top: 5}, Thresholds{})); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"weighted dB", `data-key="weighted"`, `data-key="calib_method"`, `data-key="calib_entry"`,
		"23.46", ">gptq<", "experts.0.gate_proj",
		"calibration gptq from stats.safetensors (1000 tokens, tiny), weighted SQNR 23.46 dB, gptq 3, weighted 1, 2 saw no tokens, 0 without statistics"} {
		if !strings.Contains(cal.String(), s) {
			t.Errorf("calibrated page lacks %q", s)
		}
	}
	var text bytes.Buffer
	if err := WriteTable(&text, NewView("r", rep, Query{Top: 5}, Thresholds{})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "calibration gptq from stats.safetensors") || !strings.Contains(text.String(), "gptq") {
		t.Errorf("calibrated table lacks the calibration line or method:\n%s", text.String())
	}
}

// TestPlotShowsWeightedSQNR: a calibrated report's figure gets a histogram of the weighted
// SQNR per output ("int4 weighted") holding every selected row that has one; an uncalibrated
// report's does not.
func TestPlotShowsWeightedSQNR(t *testing.T) {
	rep, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	hasWeighted := func(f *figure) (n int, found bool) {
		for _, h := range f.hists {
			if strings.HasSuffix(h.scheme, " weighted") {
				n += len(h.vals)
				found = true
			}
		}
		return n, found
	}
	f, err := newFigure(NewView("r", rep, Query{}, Thresholds{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, found := hasWeighted(f); found {
		t.Fatal("uncalibrated figure has a weighted histogram")
	}
	want := 0
	for i, r := range rep.Tensors {
		if r.Scheme == "int4" {
			v := report.Float(20 + float64(i%7))
			rep.Tensors[i].WeightedSQNR = &v
			want++
		}
	}
	if want == 0 {
		t.Fatal("test report has no int4 rows")
	}
	v := NewView("r", rep, Query{}, Thresholds{})
	f, err = newFigure(v)
	if err != nil {
		t.Fatal(err)
	}
	if n, found := hasWeighted(f); !found || n != want {
		t.Fatalf("weighted histograms hold %d values (found %v), want %d", n, found, want)
	}
	var png bytes.Buffer
	if err := WritePlot(&png, v, FormatPNG); err != nil || png.Len() == 0 {
		t.Fatalf("plot: %v (%d bytes)", err, png.Len())
	}
}
