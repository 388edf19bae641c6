package rules

import (
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
