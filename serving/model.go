// Package serving plans a deployment of a checkpoint on GPUs: the weight bytes each GPU holds
// under the serving engines' sharding rules, the KV-cache bytes one token costs, the token capacity
// that leaves, and the launch commands of disaggregated prefill and decode pools for SGLang and
// vLLM. It reads tensor sizes and config.json only (docs/SERVING.md).
package serving

import (
	"errors"
	"fmt"

	"pdq/quantize/rules"
)

// ErrConfig: config.json lacks what a serving plan needs or holds values that cannot be served.
var ErrConfig = errors.New("serving: unusable model config")

// ErrOptions: options that contradict each other or the model.
var ErrOptions = errors.New("serving: invalid options")

// maxDim bounds the layer counts and attention dimensions a config may give, far above any model,
// so that no KV-cache product overflows.
const maxDim = 1 << 16

// Model holds the config.json fields that decide sharding and KV-cache size.
type Model struct {
	Layers      int // num_hidden_layers: layers with a KV cache (MTP layers come after them)
	MTPLayers   int // num_nextn_predict_layers
	Heads       int // num_attention_heads
	KVHeads     int // num_key_value_heads (GQA)
	HeadDim     int // head_dim (GQA; hidden_size / heads when absent)
	VHeadDim    int // v_head_dim (GQA; HeadDim when absent)
	KVLoraRank  int // kv_lora_rank: the MLA latent (0 without MLA)
	QKRope      int // qk_rope_head_dim (MLA)
	IndexHead   int // index_head_dim: the sparse-attention indexer key (0 without one)
	Experts     int // n_routed_experts
	MoEInter    int // moe_intermediate_size
	MaxPosition int // max_position_embeddings (0 when absent)
}

// Attention names the KV-cache layout of a model.
type Attention string

// The layouts.
const (
	AttnMLA        Attention = "mla"         // multi-head latent attention (DeepSeek-V3, Kimi K2)
	AttnMLAIndexer Attention = "mla+indexer" // MLA with the DeepSeek sparse-attention indexer (GLM-5, DeepSeek-V3.2)
	AttnGQA        Attention = "gqa"         // grouped-query attention (GLM-4.x, Qwen)
)

// Attention returns the model's KV-cache layout.
func (m Model) Attention() Attention {
	switch {
	case m.KVLoraRank > 0 && m.IndexHead > 0:
		return AttnMLAIndexer
	case m.KVLoraRank > 0:
		return AttnMLA
	}
	return AttnGQA
}

// ModelFromConfig reads a parsed config.json. Multimodal wrappers (Kimi K2.5) keep the language
// model under text_config; that is read when the top level has no layers.
func ModelFromConfig(cfg map[string]any) (Model, error) {
	if cfg == nil {
		return Model{}, fmt.Errorf("%w: no config.json", ErrConfig)
	}
	if _, ok := cfg["num_hidden_layers"]; !ok {
		if tc, ok := cfg["text_config"].(map[string]any); ok {
			cfg = tc
		}
	}
	num := func(k string) int {
		if n, ok := rules.ConfigInt(cfg, k); ok && n > 0 && n < 1<<24 { // dimensions, not sizes: 16M is far above any
			return int(n)
		}
		return 0
	}
	m := Model{
		Layers: num("num_hidden_layers"), MTPLayers: num("num_nextn_predict_layers"), Heads: num("num_attention_heads"),
		KVHeads: num("num_key_value_heads"), HeadDim: num("head_dim"), VHeadDim: num("v_head_dim"),
		KVLoraRank: num("kv_lora_rank"), QKRope: num("qk_rope_head_dim"), Experts: num("n_routed_experts"),
		MoEInter: num("moe_intermediate_size"), MaxPosition: num("max_position_embeddings"),
	}
	if m.Experts == 0 {
		m.Experts = num("num_experts") // Qwen-style name
	}
	// The engines recognise the indexer by index_topk (SGLang is_deepseek_dsa, vLLM
	// DeepseekV32); its key width is index_head_dim.
	if _, ok := cfg["index_topk"]; ok || num("index_n_heads") > 0 {
		m.IndexHead = num("index_head_dim")
	}
	if m.Layers == 0 || m.Heads == 0 {
		return Model{}, fmt.Errorf("%w: num_hidden_layers and num_attention_heads are required", ErrConfig)
	}
	if m.KVLoraRank == 0 {
		if m.KVHeads == 0 {
			m.KVHeads = m.Heads
		}
		if m.HeadDim == 0 {
			if h := num("hidden_size"); h > 0 {
				m.HeadDim = h / m.Heads
			}
		}
		if m.VHeadDim == 0 {
			m.VHeadDim = m.HeadDim
		}
		if m.HeadDim == 0 {
			return Model{}, fmt.Errorf("%w: neither head_dim nor hidden_size", ErrConfig)
		}
	}
	for _, d := range []int{m.Layers, m.Heads, m.KVHeads, m.HeadDim, m.VHeadDim, m.KVLoraRank, m.QKRope, m.IndexHead} {
		if d > maxDim {
			return Model{}, fmt.Errorf("%w: a layer count or attention dimension of %d (at most %d)", ErrConfig, d, maxDim)
		}
	}
	return m, nil
}
