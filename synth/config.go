// Package synth generates synthetic mixture-of-experts checkpoints: real tensor names and shapes
// (GLM-4.x and DeepSeek-V3/GLM-5/Kimi-K2 styles), BF16 or FP8-block weights with realistic value
// statistics, sharded with an index and a config.json. It is the fixture behind the project's tests
// and demo, and can also lay out header-only (sparse) copies of full-size models from their configs.
package synth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"pdq/internal/floatcodec"
)

// Style names a family of tensor naming and attention layout.
type Style string

// The supported styles.
const (
	// StyleGLM4 is GLM-4.5/4.6/4.7 (glm4_moe): grouped-query attention with q/k/v/o projections and biases.
	StyleGLM4 Style = "glm4"
	// StyleDeepSeek is DeepSeek-V3, Kimi K2 and GLM-5 (deepseek_v3 / glm_moe_dsa): multi-head latent attention.
	StyleDeepSeek Style = "deepseek"
)

// Model holds the dimensions that decide every tensor name and shape.
type Model struct {
	Style           Style
	ModelType       string
	Hidden          int // hidden_size
	Layers          int // num_hidden_layers (MTP layers come after these)
	DenseLayers     int // first_k_dense_replace
	Intermediate    int // intermediate_size of the dense MLP layers
	MoEIntermediate int // moe_intermediate_size
	Experts         int // n_routed_experts
	SharedExperts   int // n_shared_experts
	ExpertsPerTok   int
	Vocab           int
	Heads           int
	KVHeads         int
	HeadDim         int
	AttentionBias   bool
	// Multi-head latent attention (StyleDeepSeek).
	QLoraRank  int
	KVLoraRank int
	QKNope     int
	QKRope     int
	VHead      int
	// GLM-5's sparse-attention indexer; zero when absent.
	IndexHeads   int
	IndexHeadDim int
	MTPLayers    int // num_nextn_predict_layers
	// Source is the config.json the model was read from (FromConfigFile), nil otherwise: ConfigJSON
	// keeps its architectures and every field the dimensions above do not decide (GLM-5's
	// GlmMoeDsaForCausalLM, index_topk, rope_interleave, max_position_embeddings, ...), so the
	// engines would take the same model path as for the real checkpoint.
	Source map[string]any `json:"-"`
}

// Tiny returns a small model of the given style: a few MiB, every tensor kind present, dimensions
// that satisfy the engines' divisibility rules (multiples of 128).
func Tiny(style Style) Model {
	m := Model{
		Style: style, Hidden: 256, Layers: 3, DenseLayers: 1, Intermediate: 512, MoEIntermediate: 128,
		Experts: 8, SharedExperts: 1, ExpertsPerTok: 2, Vocab: 1024, Heads: 4, KVHeads: 2, HeadDim: 64,
	}
	switch style {
	case StyleGLM4:
		m.ModelType, m.AttentionBias = "glm4_moe", true
	default:
		m.Style, m.ModelType = StyleDeepSeek, "deepseek_v3"
		m.QLoraRank, m.KVLoraRank, m.QKNope, m.QKRope, m.VHead = 128, 128, 64, 32, 64
	}
	return m
}

// Validate checks that the dimensions make sense.
func (m Model) Validate() error {
	if m.Style != StyleGLM4 && m.Style != StyleDeepSeek {
		return fmt.Errorf("synth: unknown style %q (want %q or %q)", m.Style, StyleGLM4, StyleDeepSeek)
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"hidden", m.Hidden}, {"layers", m.Layers}, {"moe intermediate", m.MoEIntermediate}, {"experts", m.Experts}, {"vocab", m.Vocab}, {"heads", m.Heads}} {
		if d.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", d.name, d.v)
		}
	}
	if m.DenseLayers < 0 || m.DenseLayers > m.Layers {
		return fmt.Errorf("synth: dense layers %d outside [0, %d]", m.DenseLayers, m.Layers)
	}
	return nil
}

// hfConfig is the subset of a Hugging Face config.json that Model reads and writes.
type hfConfig struct {
	Architectures   []string `json:"architectures"`
	ModelType       string   `json:"model_type"`
	Hidden          int      `json:"hidden_size"`
	Layers          int      `json:"num_hidden_layers"`
	DenseLayers     int      `json:"first_k_dense_replace"`
	Intermediate    int      `json:"intermediate_size"`
	MoEIntermediate int      `json:"moe_intermediate_size"`
	Experts         int      `json:"n_routed_experts"`
	SharedExperts   int      `json:"n_shared_experts"`
	ExpertsPerTok   int      `json:"num_experts_per_tok"`
	Vocab           int      `json:"vocab_size"`
	Heads           int      `json:"num_attention_heads"`
	KVHeads         int      `json:"num_key_value_heads"`
	HeadDim         int      `json:"head_dim"`
	AttentionBias   bool     `json:"attention_bias"`
	QLoraRank       int      `json:"q_lora_rank"`
	KVLoraRank      int      `json:"kv_lora_rank"`
	QKNope          int      `json:"qk_nope_head_dim"`
	QKRope          int      `json:"qk_rope_head_dim"`
	VHead           int      `json:"v_head_dim"`
	IndexHeads      int      `json:"index_n_heads"`
	IndexHeadDim    int      `json:"index_head_dim"`
	MTPLayers       int      `json:"num_nextn_predict_layers"`
}

// FromConfigFile reads a Hugging Face config.json and returns the model it describes. Models with
// kv_lora_rank use StyleDeepSeek naming; others StyleGLM4.
func FromConfigFile(path string) (Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Model{}, fmt.Errorf("synth: %w", err)
	}
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return Model{}, fmt.Errorf("synth: %s: %w", path, err)
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Model{}, fmt.Errorf("synth: %s: %w", path, err)
	}
	m := Model{
		Style: StyleGLM4, ModelType: c.ModelType, Hidden: c.Hidden, Layers: c.Layers, DenseLayers: c.DenseLayers,
		Intermediate: c.Intermediate, MoEIntermediate: c.MoEIntermediate, Experts: c.Experts,
		SharedExperts: c.SharedExperts, ExpertsPerTok: c.ExpertsPerTok, Vocab: c.Vocab, Heads: c.Heads,
		KVHeads: c.KVHeads, HeadDim: c.HeadDim, AttentionBias: c.AttentionBias, QLoraRank: c.QLoraRank,
		KVLoraRank: c.KVLoraRank, QKNope: c.QKNope, QKRope: c.QKRope, VHead: c.VHead,
		IndexHeads: c.IndexHeads, IndexHeadDim: c.IndexHeadDim, MTPLayers: c.MTPLayers, Source: raw,
	}
	if c.KVLoraRank > 0 {
		m.Style = StyleDeepSeek
	}
	if m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if err := m.Validate(); err != nil {
		return Model{}, fmt.Errorf("synth: %s: %w", path, err)
	}
	return m, nil
}

// ConfigJSON returns a config.json for the model in the Hugging Face layout: Source's fields (when
// the model was read from a config) with the dimensions of m. fp8 adds the DeepSeek-style FP8
// block quantization_config; Source's own quantization_config is never kept.
func (m Model) ConfigJSON(fp8 bool) ([]byte, error) {
	c := m.configFields()
	if m.Source != nil {
		src := make(map[string]any, len(m.Source)+len(c))
		for k, v := range m.Source {
			src[k] = v
		}
		delete(src, "quantization_config")
		for k := range src {
			if strings.HasPrefix(k, "_") {
				delete(src, k) // notes of the file, not the model's
			}
		}
		for _, k := range sourceKept {
			if _, ok := m.Source[k]; ok {
				delete(c, k)
			}
		}
		for k, v := range c {
			src[k] = v
		}
		c = src
	}
	if fp8 {
		c["quantization_config"] = map[string]any{
			"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": []int{floatcodec.FP8Block, floatcodec.FP8Block},
		}
	}
	return json.MarshalIndent(c, "", "  ")
}

// sourceKept are the fields of a generated config that a Source config's own values replace:
// what the dimensions of Model do not decide.
var sourceKept = []string{"architectures", "model_type", "hidden_act", "rms_norm_eps", "tie_word_embeddings",
	"torch_dtype", "norm_topk_prob", "routed_scaling_factor", "max_position_embeddings", "rope_theta",
	"scoring_func", "topk_method", "n_group", "topk_group"}

// configFields are the config.json fields of a model generated without a Source.
func (m Model) configFields() map[string]any {
	arch := "Glm4MoeForCausalLM"
	if m.Style == StyleDeepSeek {
		arch = "DeepseekV3ForCausalLM"
	}
	c := map[string]any{
		"architectures": []string{arch}, "model_type": m.ModelType, "hidden_size": m.Hidden,
		"num_hidden_layers": m.Layers, "first_k_dense_replace": m.DenseLayers,
		"intermediate_size": m.Intermediate, "moe_intermediate_size": m.MoEIntermediate,
		"n_routed_experts": m.Experts, "n_shared_experts": m.SharedExperts,
		"num_experts_per_tok": m.ExpertsPerTok, "vocab_size": m.Vocab, "num_attention_heads": m.Heads,
		"num_key_value_heads": m.KVHeads, "attention_bias": m.AttentionBias, "hidden_act": "silu",
		"rms_norm_eps": 1e-5, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
		"num_nextn_predict_layers": m.MTPLayers, "norm_topk_prob": true, "routed_scaling_factor": 2.5,
		"max_position_embeddings": 4096, "rope_theta": 10000,
	}
	if m.Style == StyleDeepSeek {
		c["q_lora_rank"], c["kv_lora_rank"] = m.QLoraRank, m.KVLoraRank
		c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = m.QKNope, m.QKRope, m.VHead
		c["scoring_func"], c["topk_method"], c["n_group"], c["topk_group"] = "sigmoid", "noaux_tc", 1, 1
	} else {
		c["head_dim"] = m.HeadDim
	}
	if m.IndexHeads > 0 {
		c["index_n_heads"], c["index_head_dim"] = m.IndexHeads, m.IndexHeadDim
	}
	return c
}

// Medium returns a model with dimensions a hundred times larger than Tiny's per layer (hidden
// 1024, 16 experts of 512): the base for checkpoints of hundreds of MiB to tens of GiB.
func Medium(style Style) Model {
	m := Tiny(style)
	m.Hidden, m.Intermediate, m.MoEIntermediate, m.Experts, m.Vocab = 1024, 2048, 512, 16, 8192
	m.Heads, m.KVHeads, m.HeadDim = 8, 4, 128
	if m.Style == StyleDeepSeek {
		m.QLoraRank, m.KVLoraRank, m.QKNope, m.QKRope, m.VHead = 256, 256, 64, 64, 128
	}
	return m
}

// Sized returns a model of the style whose checkpoint holds about target bytes of tensor data
// (at least the three-layer base): Tiny dimensions below 256 MiB, Medium above, with as many MoE
// layers as it takes.
func Sized(style Style, target int64, fp8 bool) Model {
	m := Tiny(style)
	if target >= 256<<20 {
		m = Medium(style)
	}
	size := func(layers int) int64 {
		mm := m
		mm.Layers = layers
		return Options{Model: mm, FP8: fp8}.DataBytes()
	}
	base := m.DenseLayers + 1
	per := size(base+1) - size(base)
	if need := target - size(base); need > 0 && per > 0 {
		m.Layers = base + int((need+per-1)/per)
	} else {
		m.Layers = max(m.Layers, base)
	}
	return m
}
