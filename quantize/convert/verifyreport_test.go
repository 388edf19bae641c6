package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/report"
	"pdq/synth"
)

// TestVerifyChecksEveryGatedField: report.json rows changed in any field a gate or selection of
// pdq report reads, and rows for tensors that do not exist, are reported by verify.
func TestVerifyChecksEveryGatedField(t *testing.T) {
	src, out := convertTiny(t, synth.StyleDeepSeek, true)
	dec := filepath.Join(out, "decode")
	path := filepath.Join(out, "report.json")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := verify(t, src, dec); !v.OK() {
		t.Fatalf("clean output: %v", v.Problems)
	}
	const target = "model.layers.1.mlp.experts.2.up_proj.weight_packed"
	for _, tc := range []struct {
		name   string
		change func(rows []map[string]any) []map[string]any
		want   string
	}{
		{"rel_rmse halved", setField(target, "rel_rmse", func(v any) any { return v.(float64) / 2 }), "rel_rmse"},
		{"max_abs_err tenfold", setField(target, "max_abs_err", func(v any) any { return v.(float64) * 10 }), "max_abs_err"},
		{"role", setField(target, "role", func(any) any { return "attention" }), "role"},
		{"scheme", setField(target, "scheme", func(any) any { return "bf16" }), "scheme"},
		{"layer", setField(target, "layer", func(any) any { return 7 }), "layer"},
		{"expert", setField(target, "expert", func(any) any { return 0 }), "expert"},
		{"group_size", setField(target, "group_size", func(any) any { return 128 }), "group_size"},
		{"sqnr", setField(target, "sqnr_db", func(v any) any { return v.(float64) + 3 }), "sqnr_db"},
		{"phantom row", func(rows []map[string]any) []map[string]any {
			for _, r := range rows {
				if r["tensor"] == target {
					c := map[string]any{}
					for k, v := range r {
						c[k] = v
					}
					c["tensor"] = "model.layers.9.mlp.experts.99.up_proj.weight_packed"
					return append(rows, c)
				}
			}
			return rows
		}, "experts.99"},
		{"duplicate row", func(rows []map[string]any) []map[string]any {
			for _, r := range rows {
				if r["tensor"] == target {
					return append(rows, r)
				}
			}
			return rows
		}, "more than one row"},
		{"unknown output", func(rows []map[string]any) []map[string]any {
			c := map[string]any{"output": "bogus", "tensor": "x"}
			return append(rows, c)
		}, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rep map[string]any
			if err := json.Unmarshal(orig, &rep); err != nil {
				t.Fatal(err)
			}
			var rows []map[string]any
			for _, r := range rep["tensors"].([]any) {
				rows = append(rows, r.(map[string]any))
			}
			rows = tc.change(rows)
			rep["tensors"] = rows
			b, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, orig, 0o644)
			v := verify(t, src, dec)
			if all := strings.Join(v.Problems, "\n"); v.OK() || !strings.Contains(all, tc.want) {
				t.Fatalf("problems %q, want one naming %q", v.Problems, tc.want)
			}
		})
	}
}

// setField returns a change that replaces field k of the row of tensor by f of its value.
func setField(tensor, k string, f func(any) any) func([]map[string]any) []map[string]any {
	return func(rows []map[string]any) []map[string]any {
		for _, r := range rows {
			if r["tensor"] == tensor {
				r[k] = f(r[k])
			}
		}
		return rows
	}
}

// TestVerifyCopiedPrefillRefusesPhantomRows: an FP8 source's prefill output is a copy and
// measures nothing, so a report.json row for it names a tensor no conversion measured.
func TestVerifyCopiedPrefillRefusesPhantomRows(t *testing.T) {
	src, out := convertTiny(t, synth.StyleDeepSeek, true)
	pre := filepath.Join(out, "prefill")
	if v := verify(t, src, pre); !v.OK() {
		t.Fatalf("clean copy: %v", v.Problems)
	}
	path := filepath.Join(out, "report.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	row := rep.Tensors[0]
	row.Output, row.Tensor = "prefill", "model.layers.1.mlp.experts.0.down_proj.weight"
	rep.Tensors = append(rep.Tensors, row)
	nb, _ := json.Marshal(rep)
	if err := os.WriteFile(path, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	if v := verify(t, src, pre); v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "down_proj.weight") {
		t.Fatalf("phantom prefill row: problems %v", v.Problems)
	}
}

// TestVerifyFlagsStrayFiles: files and directories in an output that no conversion writes there
// (a nested conversion's outputs, its journal, a stray file) are reported; side files copied from
// the source are not.
func TestVerifyFlagsStrayFiles(t *testing.T) {
	src, out := convertTiny(t, synth.StyleGLM4, false)
	if err := os.WriteFile(filepath.Join(src, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	dec := filepath.Join(out, "decode")
	if err := os.WriteFile(filepath.Join(dec, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := verify(t, src, dec); !v.OK() {
		t.Fatalf("clean output with a side file: %v", v.Problems)
	}
	for _, name := range []string{"decode", "report.json", JournalName, "extra.safetensors"} {
		path := filepath.Join(dec, name)
		var err error
		if name == "decode" {
			err = os.Mkdir(path, 0o755)
		} else {
			err = os.WriteFile(path, []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		v := verify(t, src, dec)
		if all := strings.Join(v.Problems, "\n"); !strings.Contains(all, `"`+name+`" does not belong`) {
			t.Errorf("%s in the output: problems %q", name, v.Problems)
		}
		os.RemoveAll(path)
	}
}

// TestVerifyReportFIFO: a FIFO in report.json's place is reported, not waited on.
func TestVerifyReportFIFO(t *testing.T) {
	src, out := convertTiny(t, synth.StyleGLM4, false)
	path := filepath.Join(out, "report.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(path); err != nil {
		t.Skip(err)
	}
	v := verify(t, src, filepath.Join(out, "decode"))
	if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "not a regular file") {
		t.Fatalf("problems %v", v.Problems)
	}
}
