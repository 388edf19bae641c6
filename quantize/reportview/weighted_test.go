package reportview

import (
	"bytes"
	"strings"
	"testing"

	"pdq/quantize/convert"
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
	v := convert.Float(23.456)
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
