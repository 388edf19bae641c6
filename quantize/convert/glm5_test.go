package convert_test

import (
	"context"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// TestPlanGLM5HeaderOnly plans a full-size GLM-5-FP8 layout from headers only (sparse shard files
// that cost no disk): FORMATS.md §3 puts the checkpoint near 704 GiB and its decode form, routed
// experts INT4-g32 and the rest BF16, near 421 GiB.
func TestPlanGLM5HeaderOnly(t *testing.T) {
	m, err := synth.FromConfigFile(filepath.Join("..", "..", "testdata", "configs", "glm-5.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "glm5")
	if err := synth.Generate(context.Background(), dir, synth.Options{Model: m, FP8: true, HeaderOnly: true, MaxShardBytes: 5e9}); err != nil {
		t.Fatal(err)
	}
	cfg := readJSON(t, filepath.Join(dir, "config.json"))
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	const gib = 1 << 30
	for _, tc := range []struct {
		name         string
		o            convert.Options
		decLo, decHi float64
	}{
		{"group 32", convert.Options{GroupSize: 32}, 400, 440},
		{"group 128", convert.Options{GroupSize: 128}, 360, 420},
	} {
		p, err := convert.NewPlan(ck, cfg, tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		in := float64(p.InputBytes()) / gib
		dec := float64(p.Output(convert.KindDecode).Bytes(ck)) / gib
		pre := float64(p.Output(convert.KindPrefill).Bytes(ck)) / gib
		t.Logf("GLM-5 %s: input %.2f GiB, prefill %.2f GiB, decode %.2f GiB in %d shards", tc.name, in, pre, dec, len(p.Output(convert.KindDecode).Shards))
		if in < 680 || in > 720 {
			t.Errorf("input %.2f GiB, want 680..720", in)
		}
		if pre != in || !p.Output(convert.KindPrefill).CopySource {
			t.Errorf("prefill of an FP8 source: %.2f GiB, copy %v; want the source unchanged", pre, p.Output(convert.KindPrefill).CopySource)
		}
		if dec < tc.decLo || dec > tc.decHi {
			t.Errorf("decode %.2f GiB, want %v..%v", dec, tc.decLo, tc.decHi)
		}
		var planned int64
		for _, s := range p.Output(convert.KindDecode).Shards {
			planned += s.Layout.FileSize
			if s.Layout.FileSize > 5_000_000_000+int64(len(s.Layout.Prefix)) && len(s.Specs) > 1 {
				t.Errorf("%s: %d bytes over the default 5 GB cap", s.FileName, s.Layout.FileSize)
			}
		}
		if planned != p.Output(convert.KindDecode).Bytes(ck) {
			t.Errorf("decode shards sum to %d, Bytes says %d", planned, p.Output(convert.KindDecode).Bytes(ck))
		}
	}
}

// BenchmarkOpenAndPlanGLM5 times what `pdq plan` does on a 706 GiB GLM-5-FP8 checkpoint: open
// 119k tensor headers and plan both outputs (the sparse layout is generated once, outside the
// timing).
func BenchmarkOpenAndPlanGLM5(b *testing.B) {
	m, err := synth.FromConfigFile(filepath.Join("..", "..", "testdata", "configs", "glm-5.json"))
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "glm5")
	if err := synth.Generate(context.Background(), dir, synth.Options{Model: m, FP8: true, HeaderOnly: true, MaxShardBytes: 5e9}); err != nil {
		b.Fatal(err)
	}
	cfg, err := rules.LoadConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ck, err := safetensors.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := convert.NewPlan(ck, cfg, convert.Options{}); err != nil {
			b.Fatal(err)
		}
		ck.Close()
	}
}
