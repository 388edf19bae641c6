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

// TestVerifyEngineGPU: a decode output whose experts are W4AFP8 (INT4 g128 with FP8 inputs in the
// config) loads in SGLang on Hopper and is refused on Blackwell with --gpu, the rule named; without
// --gpu each generation is listed; an unknown GPU is a usage error.
func TestVerifyEngineGPU(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, code, err := runPDQ(t, "testdata", "gen", "--fp8", "--out", src); code != 0 {
		t.Fatal(err)
	}
	if _, code, err := runPDQ(t, "convert", src, "--out", out, "--only", "decode", "--group-size", "128", "-q"); code != 0 {
		t.Fatal(err)
	}
	dec := filepath.Join(out, "decode")
	stdout, code, err := runPDQ(t, "verify", "--engine", "sglang", dec)
	if code != 0 || !strings.Contains(stdout, "routed experts int4") || !strings.Contains(stdout, "Blackwell SM100 (B200, GB200): loads") {
		t.Fatalf("INT4: exit %d, %v\n%s", code, err, stdout)
	}
	cfgPath := filepath.Join(dec, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, g := range cfg["quantization_config"].(map[string]any)["config_groups"].(map[string]any) {
		g := g.(map[string]any)
		if w := g["weights"].(map[string]any); w["type"] == "int" {
			g["input_activations"] = map[string]any{"num_bits": 8, "type": "float", "symmetric": true, "strategy": "token", "dynamic": true}
		}
	}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, code, _ := runPDQ(t, "verify", "--engine", "sglang", "--gpu", "h200", dec); code != 0 || !strings.Contains(stdout, "routed experts w4afp8") {
		t.Errorf("W4AFP8 on H200: exit %d\n%s", code, stdout)
	}
	stdout, code, _ = runPDQ(t, "verify", "--engine", "sglang", "--gpu", "b200", dec)
	if code != 1 || !strings.Contains(stdout, "rule gpu") || !strings.Contains(stdout, "loads on Hopper SM90") {
		t.Errorf("W4AFP8 on B200: exit %d, want 1 naming the gpu rule\n%s", code, stdout)
	}
	if _, code, _ := runPDQ(t, "verify", "--engine", "sglang", "--gpu", "v100", dec); code != exitUsage {
		t.Errorf("--gpu v100: exit %d, want usage", code)
	}
}
