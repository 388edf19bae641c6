package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pdq/calib"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// torchPython returns a Python interpreter that imports torch: $PYTHON, python3, or
// /usr/bin/python3 (where Debian's python3-torch lives). The test is skipped without one, except
// under CI=true, where it fails.
func torchPython(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{os.Getenv("PYTHON"), "python3", "/usr/bin/python3"} {
		if py == "" {
			continue
		}
		out, err := exec.Command(py, "-c", "import torch").CombinedOutput()
		if err == nil {
			return py
		}
		tried = append(tried, py+": "+strings.TrimSpace(lastLine(string(out))))
	}
	msg := "no Python with torch (apt-get install python3-torch): " + strings.Join(tried, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestCollectAndConvert builds a tiny MoE model in torch (testdata/tiny_moe.py: expert 3 of each
// layer is never routed to), saves its weights, collects statistics with both writers, and
// converts with them: every expert of layer 0 gets GPTQ, layer 1 (no Hessian) the weighted
// search, and the never-routed experts fall back to the plain search and are counted.
func TestCollectAndConvert(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	run(t, py, "testdata/tiny_moe.py", model)
	tokens := filepath.Join(dir, "tokens.json")
	seqs := make([][]int, 12)
	for i := range seqs {
		for j := range 48 {
			seqs[i] = append(seqs[i], (i*31+j*7)%97)
		}
	}
	b, _ := json.Marshal(seqs)
	if err := os.WriteFile(tokens, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var sq [][]float32
	for _, writer := range []string{"auto", "manual"} {
		stats := filepath.Join(dir, "stats-"+writer+".safetensors")
		run(t, py, "collect_calib.py", "--module", "testdata/tiny_moe.py:build", "--data", tokens, "--out", stats,
			"--hessian", `layers\.0\.`, "--seq-len", "24", "--batch-size", "4", "--source", "tiny test", "--writer", writer)
		st, err := calib.Open(stats)
		if err != nil {
			t.Fatal(err)
		}
		d, err := st.SqMean(st.Lookup("model.layers.1.mlp.experts.2.down_proj"))
		if err != nil {
			t.Fatal(err)
		}
		sq = append(sq, d)
		if st.Tokens != 12*48 || st.Source != "tiny test" {
			t.Errorf("%s: metadata tokens %d source %q, want %d and %q", writer, st.Tokens, st.Source, 12*48, "tiny test")
		}
		// gate_proj carries the shared gate/up input; up_proj is not written.
		if st.Lookup("model.layers.0.mlp.experts.0.up_proj").Module != "model.layers.0.mlp.experts.0.gate_proj" {
			t.Errorf("%s: up_proj not looked up under its gate sibling", writer)
		}
		if e := st.Lookup("model.layers.0.mlp.experts.0.gate_proj"); e.Hessian == nil || e.K != 64 {
			t.Errorf("%s: layer 0 gate_proj entry %+v: want a 64×64 Hessian", writer, e)
		}
		if n, _ := st.EntryTokens(st.Lookup("model.layers.1.mlp.experts.3.down_proj")); n != 0 {
			t.Errorf("%s: never-routed expert saw %d tokens", writer, n)
		}
		st.Close()
	}
	// "auto" uses the safetensors package when importable (else it writes by hand too): the
	// statistics must read back the same either way.
	for j := range sq[0] {
		if sq[0][j] != sq[1][j] || sq[0][j] <= 0 {
			t.Fatalf("E[x²] channel %d: %v (auto writer) vs %v (manual writer)", j, sq[0][j], sq[1][j])
		}
	}
	st, err := calib.Open(filepath.Join(dir, "stats-manual.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ck, err := safetensors.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	cfg, err := rules.LoadConfig(ck.Dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := convert.NewPlan(ck, cfg, convert.Options{Only: "decode", Calib: st, CalibMethod: convert.CalibGPTQ})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := convert.Run(context.Background(), p, filepath.Join(dir, "out"), convert.RunOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Calibration
	if c == nil {
		t.Fatal("report without a calibration section")
	}
	// 2 layers × 4 experts × 3 projections: expert 3 never routed (6), layer 0 gptq (9), layer 1 weighted (9).
	if c.Modules[convert.CalibGPTQ] != 9 || c.Modules[convert.CalibWeighted] != 9 || c.NoTokens != 6 || c.NoHessian != 9 {
		t.Errorf("calibration summary %+v: want 9 gptq, 9 weighted (no Hessian), 6 without tokens", c)
	}
	for _, r := range rep.Tensors {
		if r.Scheme != string(convert.SchemeInt4) {
			continue
		}
		withStats := r.CalibMethod == convert.CalibGPTQ || r.CalibMethod == convert.CalibWeighted
		if withStats != (r.WeightedSQNR != nil) || (r.CalibMethod == convert.CalibNone) != (r.Expert == 3) {
			t.Errorf("%s: method %q, weighted SQNR %v", r.Module, r.CalibMethod, r.WeightedSQNR)
		}
	}
}

// TestCollectFusedExperts: the collector on the tiny model with each layer's experts fused into
// 3-D parameters (testdata/tiny_moe.py build_fused, transformers' layout and calling convention)
// writes the statistics the per-expert-Linear version of the same weights gives: the same
// entries under the per-expert names, the same token counts, E[x²], E[|x|] and Hessians (to
// float32 rounding, the two models' layer outputs being computed by different products); and
// converting with either file gives byte-identical shards.
func TestCollectFusedExperts(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	run(t, py, "testdata/tiny_moe.py", model)
	tokens := filepath.Join(dir, "tokens.json")
	seqs := make([][]int, 10)
	for i := range seqs {
		for j := range 40 {
			seqs[i] = append(seqs[i], (i*13+j*11)%97)
		}
	}
	b, _ := json.Marshal(seqs)
	if err := os.WriteFile(tokens, b, 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, build := range []string{"build", "build_fused"} {
		files[build] = filepath.Join(dir, build+".safetensors")
		run(t, py, "collect_calib.py", "--module", "testdata/tiny_moe.py:"+build, "--data", tokens, "--out", files[build],
			"--hessian", `layers\.0\.`, "--seq-len", "20", "--batch-size", "2", "--source", "fused test", "--writer", "manual")
	}
	a, err := calib.Open(files["build"])
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f, err := calib.Open(files["build_fused"])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := strings.Join(f.Modules(), ","), strings.Join(a.Modules(), ","); got != want || want == "" {
		t.Fatalf("fused entries %s, want %s", got, want)
	}
	exact := 0
	for _, m := range a.Modules() {
		ea, ef := a.Lookup(m), f.Lookup(m)
		na, _ := a.EntryTokens(ea)
		nf, _ := f.EntryTokens(ef)
		if na != nf {
			t.Errorf("%s: %d tokens fused, %d per expert", m, nf, na)
		}
		va, err := a.SqMean(ea)
		if err != nil {
			t.Fatal(err)
		}
		vf, err := f.SqMean(ef)
		if err != nil {
			t.Fatal(err)
		}
		wa, _ := a.AbsMean(ea)
		wf, _ := f.AbsMean(ef)
		vs := [][2][]float32{{va, vf}, {wa, wf}}
		if (ea.Hessian == nil) != (ef.Hessian == nil) {
			t.Fatalf("%s: Hessian per expert %v, fused %v", m, ea.Hessian != nil, ef.Hessian != nil)
		}
		if ea.Hessian != nil {
			ha, _ := a.Hessian(ea)
			hf, _ := f.Hessian(ef)
			vs = append(vs, [2][]float32{f32(ha), f32(hf)})
		}
		same := true
		for _, v := range vs {
			if len(v[0]) != len(v[1]) {
				t.Fatalf("%s: %d values per expert, %d fused", m, len(v[0]), len(v[1]))
			}
			for j := range v[0] {
				if v[0][j] != v[1][j] {
					same = false
					if d := math.Abs(float64(v[0][j] - v[1][j])); d > 1e-5*math.Abs(float64(v[0][j]))+1e-9 {
						t.Fatalf("%s: value %d: %g fused, %g per expert", m, j, v[1][j], v[0][j])
					}
				}
			}
		}
		if same {
			exact++
		}
	}
	t.Logf("%d of %d entries bit-identical", exact, len(a.Modules()))
	// Convert with each: the INT4 shards must be the same bytes.
	outs := map[string]string{}
	for name, file := range files {
		st, err := calib.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.Open(model)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := rules.LoadConfig(ck.Dir)
		if err != nil {
			t.Fatal(err)
		}
		p, err := convert.NewPlan(ck, cfg, convert.Options{Only: "decode", Calib: st, CalibMethod: convert.CalibGPTQ})
		if err != nil {
			t.Fatal(err)
		}
		outs[name] = filepath.Join(dir, "out-"+name)
		if _, err := convert.Run(context.Background(), p, outs[name], convert.RunOptions{Workers: 2}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		ck.Close()
	}
	shards, _ := filepath.Glob(filepath.Join(outs["build"], "*", "*.safetensors"))
	if len(shards) == 0 {
		shards, _ = filepath.Glob(filepath.Join(outs["build"], "*.safetensors"))
	}
	if len(shards) == 0 {
		t.Fatal("no output shards")
	}
	for _, sa := range shards {
		rel, _ := filepath.Rel(outs["build"], sa)
		ba, err := os.ReadFile(sa)
		if err != nil {
			t.Fatal(err)
		}
		bf, err := os.ReadFile(filepath.Join(outs["build_fused"], rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ba, bf) {
			t.Errorf("%s differs between the per-expert and the fused statistics", rel)
		}
	}
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
