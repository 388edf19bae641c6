package main

import (
	"encoding/json"
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

// TestConvertConfigWithoutQuantization: an FP8 source converted with --config FILE lacking a
// quantization_config gets the FP8 block quantization_config in its prefill copy, and both
// engines then load the prefill output.
func TestConvertConfigWithoutQuantization(t *testing.T) {
	dir := t.TempDir()
	src, out, cfgFile := filepath.Join(dir, "src"), filepath.Join(dir, "out"), filepath.Join(dir, "model-config.json")
	if _, code, err := runPDQ(t, "testdata", "gen", "--fp8", "--out", src); code != 0 {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "quantization_config")
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code, err := runPDQ(t, "convert", src, "--config", cfgFile, "--out", out, "-q"); code != 0 {
		t.Fatal(err)
	}
	b, err = os.ReadFile(filepath.Join(out, "prefill", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pre map[string]any
	if err := json.Unmarshal(b, &pre); err != nil {
		t.Fatal(err)
	}
	if qc, _ := pre["quantization_config"].(map[string]any); qc["quant_method"] != "fp8" {
		t.Errorf("prefill config.json quantization_config = %v, want the FP8 block one", pre["quantization_config"])
	}
	if stdout, code, err := runPDQ(t, "verify", "--engine", "all", filepath.Join(out, "prefill")); code != 0 {
		t.Errorf("verify --engine of the prefill copy: exit %d, %v\n%s", code, err, stdout)
	}
}

// TestVerifyEngineNoConfig: a checkpoint without config.json is refused with the way out.
func TestVerifyEngineNoConfig(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "config.json")); err != nil {
		t.Fatal(err)
	}
	_, code, err := runPDQ(t, "verify", "--engine", "vllm", src)
	if code != 1 || err == nil || !strings.Contains(hintFor(err), "config.json") {
		t.Errorf("exit %d, %v", code, err)
	}
}
