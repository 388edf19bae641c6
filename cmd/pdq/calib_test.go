package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"pdq/calib"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// calibFixture makes a tiny GLM-4 checkpoint and statistics for its expert targets: gate entries
// only (up uses them), expert 1 missing, expert 2 with no tokens; kDelta skews every K.
func calibFixture(t *testing.T, kDelta int) (src, stats string) {
	t.Helper()
	dir := t.TempDir()
	src = filepath.Join(dir, "src")
	if err := synth.Generate(context.Background(), src, synth.Options{Model: synth.Tiny(synth.StyleGLM4), Seed: 3}); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	cfg, err := rules.LoadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := convert.NewPlan(ck, cfg, convert.Options{Only: "decode"})
	if err != nil {
		t.Fatal(err)
	}
	var mods []calib.ModuleStats
	for _, m := range p.Modules {
		if m.Scheme(convert.KindDecode) != convert.SchemeInt4 || strings.HasSuffix(m.Name, "up_proj") || strings.Contains(m.Name, ".experts.1.") {
			continue
		}
		ms := calib.ModuleStats{Name: m.Name, SqMean: make([]float32, m.Cols+kDelta), Tokens: 5}
		if strings.Contains(m.Name, ".experts.2.") {
			ms.Tokens = 0
		} else {
			for j := range ms.SqMean {
				ms.SqMean[j] = float32(1 + j%7)
			}
		}
		mods = append(mods, ms)
	}
	stats = filepath.Join(dir, "stats.safetensors")
	if err := calib.WriteFile(stats, map[string]string{calib.MetaTokens: "5", calib.MetaSource: "fixture"}, mods); err != nil {
		t.Fatal(err)
	}
	return src, stats
}

// TestCalibInspect: coverage against a checkpoint, and mismatches make inspect and convert fail.
func TestCalibInspect(t *testing.T) {
	src, stats := calibFixture(t, 0)
	out, code, err := runPDQ(t, "calib", "inspect", stats, "--against", src, "--json")
	if err != nil || code != 0 {
		t.Fatalf("inspect: %v (status %d)", err, code)
	}
	var s calibSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	c := s.Against
	if s.Source != "fixture" || s.ZeroTokens == 0 || c == nil || c.Direct == 0 || c.Shared == 0 || len(c.Missing) == 0 || len(c.NoTokens) == 0 || len(c.Mismatched) != 0 {
		t.Fatalf("inspect summary %s", out)
	}
	if c.Direct+c.Shared+len(c.Missing)+len(c.NoTokens) != c.Targets {
		t.Errorf("coverage does not add up: %+v", c)
	}
	text, _, err := runPDQ(t, "calib", "inspect", stats, "--against", src)
	if err != nil || !strings.Contains(text, "through the gate/up sibling") {
		t.Errorf("text output: %v\n%s", err, text)
	}
	src, stats = calibFixture(t, 16)
	if _, code, err := runPDQ(t, "calib", "inspect", stats, "--against", src); code != exitFailure || err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("inspect of mismatched statistics: status %d, %v", code, err)
	}
	if _, code, err := runPDQ(t, "convert", src, "--out", filepath.Join(t.TempDir(), "o"), "--calib", stats, "-q"); code == 0 || err == nil || !strings.Contains(err.Error(), "input channels") {
		t.Errorf("convert with mismatched statistics: status %d, %v", code, err)
	}
}
