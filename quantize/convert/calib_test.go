package convert_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"pdq/calib"
	"pdq/quantize/convert"
)

// writeStats writes statistics for the INT4 targets of src: log-normal E[x²] and a Hessian from
// generated activations; up_proj entries are left to their gate sibling, expert 1's modules
// are missing and expert 2's saw no tokens. kDelta != 0 makes every entry's K wrong.
func writeStats(t *testing.T, src, path string, seed uint64, kDelta int) {
	t.Helper()
	p := plan(t, src, convert.Options{Only: "decode"})
	rng := rand.New(rand.NewPCG(seed, 99))
	var mods []calib.ModuleStats
	for _, m := range p.Modules {
		if m.Scheme(convert.KindDecode) != convert.SchemeInt4 || strings.HasSuffix(m.Name, ".up_proj") || strings.Contains(m.Name, ".experts.1.") {
			continue
		}
		k := m.Cols + kDelta
		ms := calib.ModuleStats{Name: m.Name, SqMean: make([]float32, k), Tokens: 64}
		if strings.Contains(m.Name, ".experts.2.") {
			ms.Tokens = 0
			mods = append(mods, ms)
			continue
		}
		const n = 64
		x := make([]float64, n*k)
		for j := range k {
			sc := math.Exp(rng.NormFloat64() / 2)
			for i := range n {
				x[i*k+j] = sc * rng.NormFloat64()
			}
		}
		ms.Hessian = make([]float32, k*k)
		for a := range k {
			for b := range k {
				var s float64
				for i := range n {
					s += x[i*k+a] * x[i*k+b]
				}
				ms.Hessian[a*k+b] = float32(s / n)
			}
			ms.SqMean[a] = ms.Hessian[a*k+a]
		}
		mods = append(mods, ms)
	}
	if err := calib.WriteFile(path, map[string]string{calib.MetaTokens: "64", calib.MetaSource: "synthetic"}, mods); err != nil {
		t.Fatal(err)
	}
}

func openStats(t *testing.T, path string) *calib.Stats {
	t.Helper()
	st, err := calib.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCalibDeterministic: with statistics, weighted and gptq outputs and reports are
// byte-identical for any number of workers; the report counts missing and token-less modules.
func TestCalibDeterministic(t *testing.T) {
	src := glm4Source(t)
	stats := filepath.Join(t.TempDir(), "stats.safetensors")
	writeStats(t, src, stats, 1, 0)
	for _, method := range []string{convert.CalibWeighted, convert.CalibGPTQ} {
		o := convert.Options{GroupSize: 32, MaxShardSize: 1 << 20, Calib: openStats(t, stats), CalibMethod: method, CalibActOrder: method == convert.CalibGPTQ}
		var first map[string][]byte
		for i, ro := range []convert.RunOptions{{Workers: 1}, {Workers: 8, MaxMemory: 1 << 20}} {
			out := filepath.Join(t.TempDir(), "out")
			rep := convertTo(t, src, out, o, ro)
			files := outputFiles(t, out)
			if i == 0 {
				first = files
				c := rep.Calibration
				if c == nil || c.Modules[method] == 0 || c.NoStats == 0 || c.NoTokens == 0 || c.WeightedSQNR == nil {
					t.Fatalf("%s: calibration summary %+v: want modules with %s, some without statistics and some without tokens", method, c, method)
				}
				if c.Shared == 0 {
					t.Errorf("%s: no up_proj used its gate sibling's statistics", method)
				}
				for _, r := range rep.Tensors {
					if r.CalibMethod == method && !(float64(*r.WeightedSQNR) > 10) {
						t.Errorf("%s: %s weighted SQNR %v", method, r.Module, *r.WeightedSQNR)
					}
				}
				continue
			}
			sameFiles(t, method+": workers 1 vs 8", first, files)
		}
	}
}

// TestCalibMismatchRefused: statistics whose channel count differs from a module's are refused
// at planning, naming the module.
func TestCalibMismatchRefused(t *testing.T) {
	src := glm4Source(t)
	stats := filepath.Join(t.TempDir(), "bad.safetensors")
	writeStats(t, src, stats, 1, 8)
	_, err := tryPlan(t, src, convert.Options{Calib: openStats(t, stats)})
	if !errors.Is(err, calib.ErrMismatch) || !strings.Contains(err.Error(), "experts.0.") {
		t.Fatalf("plan with mismatched statistics: %v, want calib.ErrMismatch naming the module", err)
	}
	if _, err := tryPlan(t, src, convert.Options{CalibMethod: convert.CalibGPTQ}); !errors.Is(err, convert.ErrBadOptions) {
		t.Errorf("gptq without statistics: %v, want ErrBadOptions", err)
	}
}

// TestCalibResumeRefusesOtherStats: the plan ID includes the statistics file's identity.
func TestCalibResumeRefusesOtherStats(t *testing.T) {
	src := glm4Source(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	writeStats(t, src, a, 1, 0)
	writeStats(t, src, b, 2, 0)
	out := filepath.Join(dir, "out")
	o := convert.Options{Only: "decode", Calib: openStats(t, a)}
	convertTo(t, src, out, o, convert.RunOptions{Workers: 2})
	if _, err := runPlan(plan(t, src, o), out, convert.RunOptions{Existing: convert.Resume}); err != nil {
		t.Fatalf("resume with the same statistics: %v", err)
	}
	o.Calib = openStats(t, b)
	if _, err := runPlan(plan(t, src, o), out, convert.RunOptions{Existing: convert.Resume}); err == nil {
		t.Fatal("resume with another statistics file accepted")
	}
	if _, err := runPlan(plan(t, src, convert.Options{Only: "decode"}), out, convert.RunOptions{Existing: convert.Resume}); err == nil {
		t.Fatal("resume without the statistics file accepted")
	}
}
