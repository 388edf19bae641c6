package reportview

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/report"
)

// TestWeightedInCSVSortAndDiff: a calibrated report's CSV has calib_method and the weighted
// metrics; --sort weighted_sqnr orders by the weighted SQNR (rows without one last); a comparison
// of two calibrated runs carries the weighted SQNRs and their change into text, CSV and JSON.
func TestWeightedInCSVSortAndDiff(t *testing.T) {
	load := func() *report.Report {
		rep, err := Load("testdata/report.json")
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a, b := load(), load()
	var int4 []int
	for i := range a.Tensors {
		if a.Tensors[i].Scheme == "int4" {
			int4 = append(int4, i)
		}
	}
	for n, i := range int4 {
		wa, wb := report.Float(30-float64(n%7)), report.Float(29-float64(n%5))
		a.Tensors[i].WeightedSQNR, a.Tensors[i].CalibMethod = &wa, convert.CalibGPTQ
		b.Tensors[i].WeightedSQNR, b.Tensors[i].CalibMethod = &wb, convert.CalibWeighted
	}
	key, err := ParseSortKey("weighted_sqnr")
	if err != nil {
		t.Fatal(err)
	}
	v := NewView("a", a, Query{Sort: key}, Thresholds{})
	for i := 1; i < len(v.Selected); i++ {
		p, q := v.Selected[i-1].WeightedSQNR, v.Selected[i].WeightedSQNR
		if p == nil && q != nil || p != nil && q != nil && *p > *q {
			t.Fatalf("rows %d, %d out of weighted order", i-1, i)
		}
	}
	var c bytes.Buffer
	if err := WriteCSV(&c, v); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	im, iw := slices.Index(recs[0], "calib_method"), slices.Index(recs[0], "weighted_sqnr_db")
	if im < 0 || iw < 0 || recs[1][im] != "gptq" || recs[1][iw] != "24" {
		t.Fatalf("CSV header %v, first row %v", recs[0], recs[1])
	}
	v.Compare("b", b)
	var txt, cj, js bytes.Buffer
	if err := WriteTable(&txt, v); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&cj, v); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "Δ weighted") || !strings.Contains(txt.String(), "|Δ weighted SQNR|") {
		t.Errorf("comparison table lacks the weighted change:\n%s", txt.String())
	}
	if !strings.Contains(cj.String(), "delta_weighted_sqnr_db") || !strings.Contains(js.String(), `"delta_weighted_sqnr_db"`) {
		t.Errorf("comparison CSV or JSON lacks the weighted change")
	}
}
