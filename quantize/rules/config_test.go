package rules

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLoadConfigRefusals: a FIFO, an oversized file, trailing data and a non-object are refused
// with ErrBadConfig, without hanging or reading the whole file.
func TestLoadConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"a": "`+strings.Repeat("x", MaxConfigBytes)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"trailing.json": `{"a": 1} {"b": 2}`, "array.json": `[1, 2]`, "null.json": `null`} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	for _, name := range []string{"fifo.json", "big.json", "trailing.json", "array.json", "null.json"} {
		if _, err := LoadConfigFile(filepath.Join(dir, name)); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v, want ErrBadConfig", name, err)
		}
	}
	os.WriteFile(filepath.Join(dir, "ok.json"), []byte(`{"n": 9223372036854775808, "k": 7, "f": 7.0}`), 0o644)
	cfg, err := LoadConfigFile(filepath.Join(dir, "ok.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := ConfigInt(cfg, "k"); !ok || n != 7 {
		t.Errorf("k: %d %v", n, ok)
	}
	if n, ok := ConfigInt(cfg, "f"); !ok || n != 7 {
		t.Errorf("f 7.0: %d %v", n, ok)
	}
	if _, ok := ConfigInt(cfg, "n"); ok {
		t.Error("2^63 read as an int64")
	}
}

// TestTextConfig: a multimodal wrapper's text_config is read like a top-level config (Kimi
// K2.5's layout), a key at the top level wins, and CheckConfig checks the nested sizes.
func TestTextConfig(t *testing.T) {
	qc := map[string]any{"quant_method": "compressed-tensors"}
	cases := []struct {
		name    string
		cfg     map[string]any
		hidden  int64
		ok      bool
		quant   bool
		checkOK bool
	}{
		{"top level", map[string]any{"hidden_size": json.Number("7168"), "quantization_config": qc}, 7168, true, true, true},
		{"nested", map[string]any{"text_config": map[string]any{"hidden_size": json.Number("7168"), "quantization_config": qc}}, 7168, true, true, true},
		{"top wins", map[string]any{"hidden_size": json.Number("64"), "text_config": map[string]any{"hidden_size": json.Number("7168"), "quantization_config": json.Number("3")}}, 64, true, false, true},
		{"nested bad size", map[string]any{"text_config": map[string]any{"hidden_size": json.Number("-1")}}, -1, true, false, false},
		{"text_config not an object", map[string]any{"text_config": "x"}, 0, false, false, true},
		{"none", nil, 0, false, false, true},
	}
	for _, c := range cases {
		h, ok := ConfigInt(c.cfg, "hidden_size")
		if h != c.hidden || ok != c.ok {
			t.Errorf("%s: hidden_size %d %v, want %d %v", c.name, h, ok, c.hidden, c.ok)
		}
		if got := QuantizationConfig(c.cfg) != nil; got != c.quant {
			t.Errorf("%s: quantization_config found %v, want %v", c.name, got, c.quant)
		}
		if err := CheckConfig(c.cfg); (err == nil) != c.checkOK || err != nil && !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: CheckConfig %v, want ok %v", c.name, err, c.checkOK)
		}
	}
}
