package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanRefusesUselessDecode: targets that match nothing make plan and convert exit 2 saying
// what the checkpoint holds, unless --decode-without-int4 asks for such a decode checkpoint.
func TestPlanRefusesUselessDecode(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src, "--style", "glm4"); code != 0 {
		t.Fatal(err)
	}
	for _, cmd := range []string{"plan", "convert"} {
		args := []string{cmd, src, "--targets", `experts\.\d+\.gate_prj$`}
		if cmd == "convert" {
			args = append(args, "--out", filepath.Join(dir, "out"), "-q")
		}
		_, code, err := runPDQ(t, args...)
		if code != exitUsage || err == nil || !strings.Contains(err.Error(), "no module matches the targets") || !strings.Contains(err.Error(), "Linear modules, e.g.") {
			t.Errorf("%s with targets matching nothing: exit %d, %v; want 2 saying what the checkpoint holds", cmd, code, err)
		}
		if _, code, err := runPDQ(t, append(args, "--decode-without-int4")...); code != 0 {
			t.Errorf("%s --decode-without-int4: exit %d, %v", cmd, code, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "decode", "config.json")); err != nil {
		t.Errorf("convert --decode-without-int4 wrote no decode config: %v", err)
	}
}

// TestConfigRequired: a source without config.json is refused (exit 2) unless --config gives
// one; then both outputs carry it.
func TestConfigRequired(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src, "--style", "deepseek", "--fp8"); code != 0 {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "model-config.json")
	if err := os.Rename(filepath.Join(src, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	_, code, err := runPDQ(t, "convert", src, "--out", out, "-q")
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), "has no config.json") || !strings.Contains(err.Error(), "--config FILE") {
		t.Fatalf("convert without config.json: exit %d, %v; want 2 asking for --config", code, err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the refused convert created its output directory")
	}
	if _, code, err := runPDQ(t, "convert", src, "--out", out, "-q", "--config", cfg); code != 0 {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(cfg)
	if got, err := os.ReadFile(filepath.Join(out, "prefill", "config.json")); err != nil || string(got) != string(want) {
		t.Errorf("prefill/config.json (an FP8 source's copy) is not the given config (%v)", err)
	}
	if got, err := os.ReadFile(filepath.Join(out, "decode", "config.json")); err != nil || !strings.Contains(string(got), `"quantization_config"`) || !strings.Contains(string(got), `"model_type"`) {
		t.Errorf("decode/config.json lacks the model or its quantization_config (%v):\n%s", err, got)
	}
}
