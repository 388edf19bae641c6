package engines_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// planned is what a conversion would write, from headers only: the source and both outputs as
// the engines would read them (config.json round-tripped through JSON, as on disk).
type planned struct {
	source, prefill, decode engines.Input
	plan                    *convert.Plan
}

// sourceCache keeps one header-only source per config and form for the whole test binary.
type sourceCache struct {
	mu   sync.Mutex
	root string
	dirs map[string]string
}

var sources = &sourceCache{dirs: map[string]string{}}

func (c *sourceCache) get(t *testing.T, config string, fp8 bool, m synth.Model) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprintf("%s-%v", config, fp8)
	if d, ok := c.dirs[key]; ok {
		return d
	}
	dir := filepath.Join(c.root, key)
	if err := synth.Generate(context.Background(), dir, synth.Options{Model: m, FP8: fp8, HeaderOnly: true, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	c.dirs[key] = dir
	return dir
}

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "engines-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sources.root = root
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

// configPath is a real model config of testdata/configs.
func configPath(name string) string {
	return filepath.Join("..", "..", "testdata", "configs", name)
}

// layout plans the conversion of a header-only checkpoint with the real dimensions of config
// (every routed expert, the dense layers, one MoE layer, the MTP layers), FP8 blocks or BF16.
// edit, when set, changes the source config before planning (as --config FILE would).
func layout(t *testing.T, config string, fp8 bool, o convert.Options, edit func(map[string]any)) planned {
	t.Helper()
	m, err := synth.FromConfigFile(configPath(config))
	if err != nil {
		t.Fatal(err)
	}
	m.Layers = m.DenseLayers + 1
	dir := sources.get(t, config, fp8, m)
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	cfg, err := rules.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	p, err := convert.NewPlan(ck, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	out := planned{plan: p, source: engines.FromCheckpoint(ck, rules.CloneConfig(cfg))}
	out.source.Config = rules.CloneConfig(cfg)
	if pre := p.Output(convert.KindPrefill); pre != nil {
		if pre.CopySource {
			out.prefill = engines.Input{Config: rules.CloneConfig(pre.Config), Tensors: out.source.Tensors}
		} else {
			out.prefill = input(pre)
		}
	}
	if dec := p.Output(convert.KindDecode); dec != nil {
		out.decode = input(dec)
	}
	return out
}

// input is an output's planned tensors and config.
func input(o *convert.Output) engines.Input {
	in := engines.Input{Config: rules.CloneConfig(o.Config)}
	for _, s := range o.Shards {
		for _, t := range s.Specs {
			in.Tensors = append(in.Tensors, engines.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
		}
	}
	return in
}

// qconfig is the quantization_config of in (a copy the test may change).
func qconfig(t *testing.T, in *engines.Input) map[string]any {
	t.Helper()
	in.Config = rules.CloneConfig(in.Config)
	qc, ok := in.Config["quantization_config"].(map[string]any)
	if !ok {
		t.Fatal("no quantization_config")
	}
	return qc
}

// check runs engine e on in with the flags the checkpoint needs, and fails on any problem.
func checkOK(t *testing.T, what string, e engines.Engine, in engines.Input, tp int) *engines.Result {
	t.Helper()
	r := engines.Check(e, in, engines.Options{TP: tp})
	r2 := engines.Check(e, in, engines.Options{TP: tp, Flags: r.RequiredFlags()})
	for _, p := range r2.Problems {
		t.Errorf("%s: %s", what, p)
	}
	return r
}

// hasRule reports whether r has a problem of rule on a module containing module.
func hasRule(r *engines.Result, rule, module string) bool {
	for _, p := range r.Problems {
		if p.Rule == rule && (module == "" || contains(p.Module, module)) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
