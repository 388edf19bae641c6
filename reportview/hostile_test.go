package reportview

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestDecodeRefusesHostileIndices: layer and expert numbers outside -1..maxIndex are refused as
// not a report (they once panicked the plot and the page: index out of range, makeslice), and
// the figure's grid guard holds for the largest indices a report may have.
func TestDecodeRefusesHostileIndices(t *testing.T) {
	for _, f := range []string{
		`"layer": 9223372036854775807, "expert": 0`,
		`"layer": 0, "expert": 9223372036854775806`,
		`"layer": -2, "expert": 0`,
		`"layer": 0, "expert": -9223372036854775808`,
	} {
		data := `{"tensors": [{"tensor": "a", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", ` + f + `, "sqnr_db": 20}]}`
		if _, err := Decode(strings.NewReader(data), "r.json"); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", f, err)
		}
	}
	data := `{"tensors": [{"tensor": "a", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", "layer": 0, "expert": 0, "sqnr_db": 20},
		{"tensor": "b", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", "layer": 1048576, "expert": 1048576, "sqnr_db": 21}]}`
	rep, err := Decode(strings.NewReader(data), "r.json")
	if err != nil {
		t.Fatal(err)
	}
	v := NewView("r.json", rep, Query{}, Thresholds{})
	for _, format := range []string{FormatPNG, FormatSVG} {
		if err := WritePlot(&bytes.Buffer{}, v, format); err == nil || !strings.Contains(err.Error(), "too large a grid") {
			t.Errorf("%s plot of a 2^20 × 2^20 grid: %v", format, err)
		}
	}
	if err := WriteHTML(&bytes.Buffer{}, v); err != nil && !strings.Contains(err.Error(), "too large a grid") {
		t.Errorf("page of a 2^20 × 2^20 grid: %v", err)
	}
}

// TestDecodeAcceptsNullTensors: report.json files of earlier versions wrote "tensors": null for a
// conversion that measured nothing; they read as an empty report.
func TestDecodeAcceptsNullTensors(t *testing.T) {
	rep, err := Decode(strings.NewReader(`{"tool": "pdq", "summary": null, "worst": [], "tensors": null}`), "r.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tensors) != 0 {
		t.Fatalf("%d rows", len(rep.Tensors))
	}
	if err := WriteTable(&bytes.Buffer{}, NewView("r.json", rep, Query{}, Thresholds{})); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(strings.NewReader(`{"tensors": {}}`), "r.json"); !errors.Is(err, ErrFormat) {
		t.Fatalf("tensors as an object: %v", err)
	}
}
