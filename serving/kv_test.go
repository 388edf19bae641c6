package serving

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// loadConfig reads one of testdata/configs.
func loadConfig(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestKVBytesPerToken checks the KV cost of one token against hand computations from the real
// configs (testdata/configs).
func TestKVBytesPerToken(t *testing.T) {
	for _, tc := range []struct {
		config string
		dt     KVDType
		tp     int
		attn   Attention
		want   int64
	}{
		// GLM-5: kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128, 78 layers.
		// BF16: (512+64)*2 = 1152 B latent + indexer 128 B FP8 key + 4 B scale = 1284 B per layer.
		{"glm-5.json", KVBF16, 8, AttnMLAIndexer, 78 * (1152 + 132)},
		// FP8 (DSA layout): 512 B latent + 512/128*4 B scales + 64*2 B BF16 rope = 656 B, + 132 B.
		{"glm-5.json", KVFP8, 8, AttnMLAIndexer, 78 * (656 + 132)},
		// MLA latents are not split by TP: the same at TP1.
		{"glm-5.json", KVBF16, 1, AttnMLAIndexer, 78 * (1152 + 132)},
		// Kimi K2: 61 layers of (512+64) elements, no indexer.
		{"kimi-k2-instruct.json", KVBF16, 8, AttnMLA, 61 * 576 * 2},
		{"kimi-k2-instruct.json", KVFP8, 8, AttnMLA, 61 * 576},
		{"deepseek-v3.json", KVBF16, 8, AttnMLA, 61 * 576 * 2},
		// GLM-4.7: GQA, 8 KV heads of head_dim 128, 92 layers; K and V per head.
		{"glm-4.7.official.json", KVBF16, 8, AttnGQA, 92 * 1 * (128 + 128) * 2},
		{"glm-4.7.official.json", KVBF16, 4, AttnGQA, 92 * 2 * (128 + 128) * 2},
		{"glm-4.7.official.json", KVFP8, 8, AttnGQA, 92 * 1 * (128 + 128)},
		// TP16 > 8 KV heads: every rank keeps one head.
		{"glm-4.7.official.json", KVBF16, 16, AttnGQA, 92 * 1 * (128 + 128) * 2},
	} {
		m, err := ModelFromConfig(loadConfig(t, tc.config))
		if err != nil {
			t.Fatalf("%s: %v", tc.config, err)
		}
		c, err := m.KVBytesPerToken(tc.dt, Parallel{TP: tc.tp, EP: 1})
		if err != nil {
			t.Fatalf("%s %s TP%d: %v", tc.config, tc.dt, tc.tp, err)
		}
		if c.PerToken != tc.want || c.Attention != tc.attn {
			t.Errorf("%s %s TP%d: %s %d B per token, want %s %d", tc.config, tc.dt, tc.tp, c.Attention, c.PerToken, tc.attn, tc.want)
		}
		if c.Replicated != (tc.attn != AttnGQA) {
			t.Errorf("%s: replicated across TP = %v", tc.config, c.Replicated)
		}
	}
}

// TestKVBytesPerTokenDP: with DP attention a token's cache is kept by the attention-TP group
// (TP/DP GPUs) of the one DP rank that serves its request; the per-GPU cost follows the
// attention TP, and the server has DP ranks of such GPUs.
func TestKVBytesPerTokenDP(t *testing.T) {
	for _, tc := range []struct {
		config     string
		tp, dp     int
		want       int64
		attnTP, dr int
	}{
		// GLM-5 MLA + indexer: the latent is the same at any attention TP, whole on each GPU.
		{"glm-5.json", 8, 8, 78 * (1152 + 132), 1, 8},
		{"glm-5.json", 8, 2, 78 * (1152 + 132), 4, 2},
		{"kimi-k2-instruct.json", 16, 4, 61 * 576 * 2, 4, 4},
		// GLM-4.7 GQA, 8 KV heads: TP8 DP2 splits them 4 ways (2 heads per GPU), DP8 keeps all 8.
		{"glm-4.7.official.json", 8, 2, 92 * 2 * (128 + 128) * 2, 4, 2},
		{"glm-4.7.official.json", 8, 8, 92 * 8 * (128 + 128) * 2, 1, 8},
	} {
		m, err := ModelFromConfig(loadConfig(t, tc.config))
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.KVBytesPerToken(KVBF16, Parallel{TP: tc.tp, EP: 1, DP: tc.dp})
		if err != nil {
			t.Fatalf("%s TP%d DP%d: %v", tc.config, tc.tp, tc.dp, err)
		}
		if c.PerToken != tc.want || c.AttnTP != tc.attnTP || c.DPRanks != tc.dr {
			t.Errorf("%s TP%d DP%d: %d B per token per GPU, attention TP%d, %d ranks; want %d B, TP%d, %d",
				tc.config, tc.tp, tc.dp, c.PerToken, c.AttnTP, c.DPRanks, tc.want, tc.attnTP, tc.dr)
		}
	}
}

func TestKVRefusals(t *testing.T) {
	m := Model{Layers: 4, Heads: 12, KVHeads: 12, HeadDim: 64, VHeadDim: 64}
	if _, err := m.KVBytesPerToken(KVBF16, Parallel{TP: 8, EP: 1}); !errors.Is(err, ErrOptions) {
		t.Errorf("12 KV heads at TP8: %v, want ErrOptions", err)
	}
	if _, err := m.KVBytesPerToken(KVBF16, Parallel{TP: 16, EP: 1, DP: 2}); !errors.Is(err, ErrOptions) {
		t.Errorf("12 KV heads at attention TP8 (TP16 DP2): %v, want ErrOptions", err)
	}
	if _, err := m.KVBytesPerToken(KVBF16, Parallel{TP: 8, EP: 1, DP: 3}); !errors.Is(err, ErrOptions) {
		t.Errorf("DP3 of TP8: %v, want ErrOptions", err)
	}
	if _, err := m.KVBytesPerToken("fp16", Parallel{TP: 4, EP: 1}); !errors.Is(err, ErrOptions) {
		t.Errorf("fp16: %v, want ErrOptions", err)
	}
	if _, err := ParseKVDType("int8"); !errors.Is(err, ErrOptions) {
		t.Errorf("int8: %v", err)
	}
	if _, err := ModelFromConfig(map[string]any{"hidden_size": 1024.0}); !errors.Is(err, ErrConfig) {
		t.Errorf("no layers: %v, want ErrConfig", err)
	}
	if _, err := ModelFromConfig(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil config: %v", err)
	}
	// Kimi K2.5-style wrapper: the language model under text_config.
	wrapped := map[string]any{"text_config": loadConfig(t, "kimi-k2-instruct.json")}
	if m, err := ModelFromConfig(wrapped); err != nil || m.Layers != 61 || m.KVLoraRank != 512 {
		t.Errorf("text_config: %+v %v", m, err)
	}
}

// FuzzModelFromConfig: any config.json gives a model or ErrConfig, and a model's KV cost is
// positive or an error; nothing panics.
func FuzzModelFromConfig(f *testing.F) {
	for _, name := range []string{"glm-5.json", "kimi-k2-instruct.json", "glm-4.7.official.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "configs", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 8)
	}
	f.Add([]byte(`{"num_hidden_layers": 2, "num_attention_heads": 3, "kv_lora_rank": 100, "index_topk": 1, "index_head_dim": 7}`), 1)
	f.Fuzz(func(t *testing.T, b []byte, tp int) {
		var cfg map[string]any
		if json.Unmarshal(b, &cfg) != nil {
			return
		}
		m, err := ModelFromConfig(cfg)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			return
		}
		for _, dt := range []KVDType{KVBF16, KVFP8} {
			if c, err := m.KVBytesPerToken(dt, Parallel{TP: tp, EP: 1}); err == nil && c.PerToken < 0 {
				t.Fatalf("negative KV cost %+v", c)
			}
		}
	})
}
