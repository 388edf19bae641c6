package reportview

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadFixture(t *testing.T) {
	rep, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tensors) == 0 || rep.Tool == "" {
		t.Fatalf("fixture read as %d tensors, tool %q", len(rep.Tensors), rep.Tool)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not json", `{"tensors": [`, "not a pdq report"},
		{"array", `[1, 2]`, "not a pdq report"},
		{"no tensors", `{"tool": "pdq"}`, `no "tensors" list`},
		{"tensors not a list", `{"tensors": {"a": 1}}`, `no "tensors" list`},
		{"tensors null", `{"tensors": null}`, `no "tensors" list`},
		{"wrong field type", `{"tensors": [{"tensor": "a", "output": "decode", "sqnr_db": "high"}]}`, "not a pdq report"},
		{"no name", `{"tensors": [{"output": "decode"}]}`, "tensors[0]: no tensor name"},
		{"no output", `{"tensors": [{"tensor": "w"}]}`, `tensor "w": no output`},
		{"negative elements", `{"tensors": [{"tensor": "w", "output": "decode", "elements": -4}]}`, "negative element count"},
		{"negative dim", `{"tensors": [{"tensor": "w", "output": "decode", "shape": [4, -1]}]}`, "negative dimension"},
		{"bad group", `{"tensors": [{"tensor": "w", "output": "decode", "group_size": -7}]}`, "group size -7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.json), "r.json")
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			if !strings.Contains(err.Error(), "r.json") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want the file name and %q", err, tc.want)
			}
		})
	}
}

func TestDecodeNullIsExact(t *testing.T) {
	rep, err := Decode(strings.NewReader(`{"tensors": [{"tensor": "w", "output": "decode", "group_size": -1, "sqnr_db": null, "rel_rmse": 0}]}`), "r.json")
	if err != nil {
		t.Fatal(err)
	}
	if s := float64(rep.Tensors[0].SQNR); !math.IsInf(s, 1) {
		t.Fatalf("null SQNR read as %v, want +Inf", s)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if err == nil || errors.Is(err, ErrFormat) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error", err)
	}
}

// FuzzDecode feeds arbitrary bytes to the reader and every renderer (text, JSON, CSV, the PNG and
// SVG plots, the HTML page), alone and compared with itself, under each sort key: errors are fine,
// panics are not.
func FuzzDecode(f *testing.F) {
	fixture, err := os.ReadFile("testdata/report.json")
	if err != nil {
		f.Fatal(err)
	}
	// The fixture cut to a dozen rows: every field of a real report, small enough to draw fast.
	var full map[string]any
	if err := json.Unmarshal(fixture, &full); err != nil {
		f.Fatal(err)
	}
	var rows []any
	experts := 0
	for i, r := range full["tensors"].([]any) {
		if r.(map[string]any)["role"] == "routed_experts" && experts < 9 {
			rows, experts = append(rows, r), experts+1
		} else if i < 3 {
			rows = append(rows, r)
		}
	}
	full["tensors"] = rows
	small, err := json.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add([]byte(`{"tensors": [{"tensor": "w", "output": "decode", "role": "routed_experts", "layer": 1, "expert": 2, "sqnr_db": null}]}`))
	f.Add([]byte(`{"tensors": [{"tensor": "w", "output": "decode", "layer": 1000000, "expert": 1000000, "role": "routed_experts"}]}`))
	f.Add([]byte(`{"tensors": []}`))
	f.Add([]byte(`{"tensors": null}`))
	// Indices near 2^63: once an index out of range and a makeslice panic; the grid-size guard
	// overflowed before it compared.
	f.Add([]byte(`{"tensors": [{"tensor": "a", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", "layer": 9223372036854775807, "expert": 0, "sqnr_db": 20},
		{"tensor": "b", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", "layer": 0, "expert": 9223372036854775806, "sqnr_db": 21}]}`))
	f.Add([]byte(`{"tensors": [{"tensor": "a", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", "layer": -9223372036854775808, "expert": -2, "sqnr_db": 20}]}`))
	f.Add([]byte(`{"tensors": [{"tensor": "a", "output": "decode", "role": "routed_experts", "scheme": "int4", "projection": "up_proj", "layer": 0, "expert": 0, "sqnr_db": 1e308, "weighted_sqnr_db": -1e308, "rel_rmse": 1e308}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Decode(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			return
		}
		for _, key := range SortKeys {
			// The pictures do not depend on the order: drawn for the first key only (they
			// are the slow part, and a fuzz input must take well under its time limit).
			pictures := key == SortSQNR
			v := NewView("fuzz.json", rep, Query{Top: 5, Sort: key}, Thresholds{SQNRBelow: 20, RelRMSEAbove: 0.1})
			renderAll(t, v, pictures)
			v.Compare("fuzz.json", rep)
			renderAll(t, v, pictures)
		}
	})
}

// renderAll renders v as text, JSON and CSV and, with pictures, as PNG and SVG plots and the
// HTML page; a picture may refuse the view but nothing may panic.
func renderAll(t *testing.T, v *View, pictures bool) {
	t.Helper()
	for _, render := range []func(*bytes.Buffer, *View) error{
		func(b *bytes.Buffer, v *View) error { return WriteTable(b, v) },
		func(b *bytes.Buffer, v *View) error { return WriteJSON(b, v) },
		func(b *bytes.Buffer, v *View) error { return WriteCSV(b, v) },
	} {
		var b bytes.Buffer
		if err := render(&b, v); err != nil {
			t.Fatal(err)
		}
	}
	if !pictures {
		return
	}
	for _, render := range []func(*bytes.Buffer, *View) error{
		func(b *bytes.Buffer, v *View) error { return WritePlot(b, v, FormatSVG) },
		func(b *bytes.Buffer, v *View) error { return WritePlot(b, v, FormatPNG) },
		func(b *bytes.Buffer, v *View) error { return WriteHTML(b, v) },
	} {
		var b bytes.Buffer
		_ = render(&b, v) // a figure too large to draw is refused with an error
	}
}
