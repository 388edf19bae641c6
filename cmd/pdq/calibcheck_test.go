package main

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"pdq/calib"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// TestCalibInspectChecksHessians: calib inspect --against refuses the statistics convert would
// refuse mid-run: a Hessian not symmetric, with a NaN, or with a negative diagonal element, and
// E[x²] with a negative value.
func TestCalibInspectChecksHessians(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
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
	var target *convert.Module
	for _, m := range p.Modules {
		if m.Scheme(convert.KindDecode) == convert.SchemeInt4 {
			target = m
			break
		}
	}
	k := target.Cols
	good := func() calib.ModuleStats {
		ms := calib.ModuleStats{Name: target.Name, SqMean: make([]float32, k), Hessian: make([]float32, k*k), Tokens: 5}
		for i := range k {
			ms.SqMean[i] = 1
			ms.Hessian[i*k+i] = 1
		}
		return ms
	}
	for _, tc := range []struct {
		name  string
		spoil func(ms *calib.ModuleStats)
		want  string
	}{
		{"good", func(*calib.ModuleStats) {}, ""},
		{"asymmetric", func(ms *calib.ModuleStats) { ms.Hessian[1] = 0.5 }, "do not match"},
		{"nan", func(ms *calib.ModuleStats) { ms.Hessian[k+1] = float32(math.NaN()) }, "do not match"},
		{"negative diagonal", func(ms *calib.ModuleStats) { ms.Hessian[2*k+2] = -1 }, "do not match"},
		{"negative E[x²]", func(ms *calib.ModuleStats) { ms.SqMean[3] = -1 }, "element 3 is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := good()
			tc.spoil(&ms)
			stats := filepath.Join(t.TempDir(), "stats.safetensors")
			if err := calib.WriteFile(stats, map[string]string{calib.MetaTokens: "5"}, []calib.ModuleStats{ms}); err != nil {
				t.Fatal(err)
			}
			_, code, err := runPDQ(t, "calib", "inspect", stats, "--against", src)
			if tc.name == "good" {
				if code != 0 {
					t.Fatalf("good statistics: status %d, %v", code, err)
				}
				return
			}
			if code != exitFailure || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("status %d, %v", code, err)
			}
		})
	}
}
