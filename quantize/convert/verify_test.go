package convert

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// convertTiny generates a tiny checkpoint and converts it, returning source and output dirs.
func convertTiny(t *testing.T, style synth.Style, fp8 bool) (string, string) {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "src")
	if err := synth.Generate(context.Background(), src, synth.Options{Model: synth.Tiny(style), FP8: fp8, MaxShardBytes: 1 << 20}); err != nil {
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
	p, err := NewPlan(ck, cfg, Options{MaxShardSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "out")
	if _, err := Run(context.Background(), p, out, RunOptions{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	return src, out
}

func verify(t *testing.T, src, dir string) *VerifyResult {
	t.Helper()
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := Verify(context.Background(), ck, dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// corruptTensor flips one byte in the middle of a tensor of the checkpoint in dir.
func corruptTensor(t *testing.T, dir, name string) {
	t.Helper()
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tn := ck.Tensor(name)
	if tn == nil {
		t.Fatalf("no tensor %q", name)
	}
	off := tn.Offset() + tn.ByteSize()/2
	path := tn.Shard.Path
	ck.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCleanOutputs(t *testing.T) {
	for _, c := range []struct {
		style synth.Style
		fp8   bool
	}{{synth.StyleDeepSeek, true}, {synth.StyleGLM4, false}} {
		src, out := convertTiny(t, c.style, c.fp8)
		for _, kind := range []string{"decode", "prefill"} {
			v := verify(t, src, filepath.Join(out, kind))
			if !v.OK() {
				t.Errorf("%s %s: problems: %v", c.style, kind, v.Problems)
			}
			if v.Output != kind {
				t.Errorf("output detected as %q, want %q", v.Output, kind)
			}
			if !c.fp8 || kind == "decode" {
				if !v.ReportChecked || len(v.Report.Tensors) == 0 {
					t.Errorf("%s %s: report not compared or no metrics recomputed", c.style, kind)
				}
			}
		}
	}
}

func TestVerifyFindsCorruption(t *testing.T) {
	src, out := convertTiny(t, synth.StyleDeepSeek, true)
	dec := filepath.Join(out, "decode")

	corruptTensor(t, dec, "model.layers.1.mlp.experts.2.up_proj.weight_packed")
	v := verify(t, src, dec)
	if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "experts.2.up_proj") {
		t.Fatalf("corrupted packed weights not reported: %v", v.Problems)
	}

	corruptTensor(t, dec, "model.layers.0.input_layernorm.weight")
	v = verify(t, src, dec)
	if !strings.Contains(strings.Join(v.Problems, "\n"), "input_layernorm") {
		t.Fatalf("corrupted copied tensor not reported: %v", v.Problems)
	}

	pre := filepath.Join(out, "prefill")
	corruptTensor(t, pre, "model.layers.1.mlp.experts.0.down_proj.weight")
	if v := verify(t, src, pre); v.OK() {
		t.Fatal("corrupted prefill copy not reported")
	}
}

func TestVerifyFindsConfigAndLayoutProblems(t *testing.T) {
	src, out := convertTiny(t, synth.StyleGLM4, false)
	dec := filepath.Join(out, "decode")
	cfgPath := filepath.Join(dec, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), `"re:.*\\.self_attn\\.o_proj$"`, `"re:nothing$"`, 1)
	if bad == string(b) {
		t.Fatal("test setup: ignore entry for o_proj not found in config")
	}
	if err := os.WriteFile(cfgPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := verify(t, src, dec); v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "config.json") {
		t.Fatalf("config without an ignore entry not reported: %v", v.Problems)
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// An output missing a shard fails to open: the index names it.
	ents, _ := os.ReadDir(dec)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".safetensors") {
			os.Remove(filepath.Join(dec, e.Name()))
			break
		}
	}
	ck, _ := safetensors.Open(src)
	defer ck.Close()
	if _, err := Verify(context.Background(), ck, dec, 1); err == nil {
		t.Fatal("output with a missing shard verified")
	}
}
