package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyEngine: pdq verify --engine passes a conversion's outputs, and names the module and
// the rule, exit 1, once the decode ignore list no longer reaches SGLang's fused gate_up_proj.
func TestVerifyEngine(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, code, err := runPDQ(t, "testdata", "gen", "--fp8", "--out", src); code != 0 {
		t.Fatal(err)
	}
	if _, code, err := runPDQ(t, "convert", src, "--out", out, "-q"); code != 0 {
		t.Fatal(err)
	}
	stdout, code, err := runPDQ(t, "verify", "--engine", "all", "--tp", "1", out)
	if code != 0 || strings.Count(stdout, "loads as written") != 4 {
		t.Fatalf("verify --engine all: exit %d, %v\n%s", code, err, stdout)
	}
	cfg := filepath.Join(out, "decode", "config.json")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.ReplaceAll(string(b), `|gate_up_proj)`, `)`)
	if bad == string(b) {
		t.Fatal("test setup: no gate_up_proj alternative in the ignore list")
	}
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, code, _ = runPDQ(t, "verify", "--engine", "sglang", filepath.Join(out, "decode"))
	if code != 1 || !strings.Contains(stdout, "mlp.gate_up_proj") || !strings.Contains(stdout, "rule scheme-tensors") {
		t.Errorf("verify --engine sglang of a broken ignore list: exit %d\n%s", code, stdout)
	}
	if _, code, _ := runPDQ(t, "verify", "--engine", "trt", out); code != exitUsage {
		t.Errorf("unknown engine: exit %d, want usage", code)
	}
}
