package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"pdq/internal/floatcodec"
	"pdq/safetensors"
)

func generate(t *testing.T, o Options) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ck")
	if err := Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDeterministic: the same options give byte-identical shards whatever the worker count.
func TestDeterministic(t *testing.T) {
	for _, fp8 := range []bool{false, true} {
		o := Options{Model: Tiny(StyleDeepSeek), FP8: fp8, Seed: 3, MaxShardBytes: 1 << 20, Workers: 1}
		a := generate(t, o)
		o.Workers = 4
		b := generate(t, o)
		ents, _ := os.ReadDir(a)
		if len(ents) < 4 {
			t.Fatalf("expected several files, got %d", len(ents))
		}
		for _, e := range ents {
			x, _ := os.ReadFile(filepath.Join(a, e.Name()))
			y, err := os.ReadFile(filepath.Join(b, e.Name()))
			if err != nil || !bytes.Equal(x, y) {
				t.Fatalf("fp8=%v: %s differs between worker counts (%v)", fp8, e.Name(), err)
			}
		}
	}
}

// TestContents checks names, dtypes, the FP8 scale companions and value statistics.
func TestContents(t *testing.T) {
	for _, style := range []Style{StyleGLM4, StyleDeepSeek} {
		m := Tiny(style)
		dir := generate(t, Options{Model: m, FP8: true, MaxShardBytes: 1 << 20})
		ck, err := safetensors.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.Shards) < 2 {
			t.Errorf("%s: want several shards, got %d", style, len(ck.Shards))
		}
		want := Options{Model: m, FP8: true}.Specs()
		if got := len(ck.Tensors()); got != len(want) {
			t.Fatalf("%s: %d tensors, want %d", style, got, len(want))
		}
		w := ck.Tensor("model.layers.1.mlp.experts.3.down_proj.weight")
		s := ck.Tensor("model.layers.1.mlp.experts.3.down_proj.weight_scale_inv")
		if w == nil || s == nil || w.DType != safetensors.F8E4M3 || s.DType != safetensors.F32 {
			t.Fatalf("%s: expert weight or scale missing or wrong dtype", style)
		}
		if e := ck.Tensor("model.embed_tokens.weight"); e == nil || e.DType != safetensors.BF16 {
			t.Fatalf("%s: embeddings should stay BF16", style)
		}
		raw := make([]byte, w.ByteSize())
		if err := ck.ReadTensor(w, raw); err != nil {
			t.Fatal(err)
		}
		sb := make([]byte, s.ByteSize())
		if err := ck.ReadTensor(s, sb); err != nil {
			t.Fatal(err)
		}
		scales := make([]float32, s.NumElements())
		safetensors.DecodeFloat32(scales, sb, safetensors.F32)
		vals := make([]float32, w.NumElements())
		safetensors.DecodeF8E4M3(vals, raw)
		cols := int(w.Shape[1])
		var sum2 float64
		var amax float32
		for i, v := range vals {
			x := v * scales[(i/cols/floatcodec.FP8Block)*int(s.Shape[1])+(i%cols)/floatcodec.FP8Block]
			sum2 += float64(x * x)
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		sd := math.Sqrt(sum2 / float64(len(vals)))
		if sd < 0.01 || sd > 0.04 {
			t.Errorf("%s: weight std %.4f, want about %.2f", style, sd, baseSigma)
		}
		if amax != 448 {
			t.Errorf("%s: block absmax should map to 448, got %v", style, amax)
		}
		ck.Close()
	}
}

// TestSized: --size picks enough layers.
func TestSized(t *testing.T) {
	for _, target := range []int64{8 << 20, 512 << 20, 4 << 30} {
		m := Sized(StyleDeepSeek, target, true)
		got := Options{Model: m, FP8: true}.DataBytes()
		if got < target || got > target+target/4+(8<<20) {
			t.Errorf("Sized(%d) gives %d bytes", target, got)
		}
	}
}

// TestFromConfig lays out GLM-5 from its real config and checks the parameter count.
func TestFromConfig(t *testing.T) {
	m, err := FromConfigFile("../testdata/configs/glm-5.json")
	if err != nil {
		t.Fatal(err)
	}
	var experts int64
	for _, ts := range m.Tensors() {
		if ts.Kind == KindLinear && bytes.Contains([]byte(ts.Name), []byte(".experts.")) {
			experts += ts.Shape[0] * ts.Shape[1]
		}
	}
	// 256 experts x 76 MoE layers x 3 x 6144 x 2048 = 0.73e12 weights.
	if experts < 7.2e11 || experts > 7.4e11 {
		t.Errorf("GLM-5 routed expert weights: %d", experts)
	}
}

// TestConfigKeepsSource: a model read from GLM-5's config writes GLM-5's config.json
// (GlmMoeDsaForCausalLM, the DSA fields, its context length), with the overridden dimensions, so
// the engines' GLM-5 path is the one the tests exercise.
func TestConfigKeepsSource(t *testing.T) {
	m, err := FromConfigFile("../testdata/configs/glm-5.json")
	if err != nil {
		t.Fatal(err)
	}
	m.Layers, m.Experts = 4, 2
	for _, fp8 := range []bool{false, true} {
		b, err := m.ConfigJSON(fp8)
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		arch, _ := c["architectures"].([]any)
		if len(arch) != 1 || arch[0] != "GlmMoeDsaForCausalLM" {
			t.Errorf("architectures = %v, want [GlmMoeDsaForCausalLM]", c["architectures"])
		}
		for k, want := range map[string]any{"index_topk": 2048.0, "rope_interleave": true, "indexer_rope_interleave": true,
			"max_position_embeddings": 202752.0, "model_type": "glm_moe_dsa", "num_hidden_layers": 4.0, "n_routed_experts": 2.0} {
			if c[k] != want {
				t.Errorf("%s = %v, want %v", k, c[k], want)
			}
		}
		if _, ok := c["_provenance"]; ok {
			t.Errorf("file notes copied into the model config")
		}
		if _, ok := c["quantization_config"]; ok != fp8 {
			t.Errorf("fp8 %v: quantization_config present %v", fp8, ok)
		}
	}
}
