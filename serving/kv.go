package serving

import "fmt"

// KVDType is the element type of the KV cache.
type KVDType string

// The KV-cache dtypes a plan knows.
const (
	KVBF16 KVDType = "bf16"     // the engines' "auto" for BF16 models
	KVFP8  KVDType = "fp8_e4m3" // one byte per element
)

// ParseKVDType accepts bf16 (bfloat16, auto) and fp8_e4m3 (fp8).
func ParseKVDType(s string) (KVDType, error) {
	switch s {
	case "bf16", "bfloat16", "auto", "":
		return KVBF16, nil
	case "fp8_e4m3", "fp8":
		return KVFP8, nil
	}
	return "", fmt.Errorf("%w: KV-cache dtype %q (want bf16 or fp8_e4m3)", ErrOptions, s)
}

// blockQuant is the block of the DSA layouts' FP8 scales: one float32 per 128 elements.
const blockQuant = 128

// KVCost is what one token of context costs on one GPU.
type KVCost struct {
	Attention Attention `json:"attention"`
	DType     KVDType   `json:"dtype"`
	Layers    int       `json:"layers"`
	// LayerBytes is the attention cache of one layer: the MLA latent and rope key, or K and V of
	// the heads one GPU holds.
	LayerBytes int64 `json:"layer_bytes"`
	// IndexerBytes is the sparse-attention indexer key of one layer (FP8 with a float32 scale
	// per 128 elements, whatever the KV dtype).
	IndexerBytes int64 `json:"indexer_bytes,omitempty"`
	// PerToken is (LayerBytes + IndexerBytes) x Layers.
	PerToken int64 `json:"per_token"`
	// Replicated: every rank of the attention-TP group stores the whole token (MLA has one
	// latent per token, not one per head); false for GQA, whose heads are split across ranks.
	Replicated bool `json:"replicated_across_tp"`
	// AttnTP is the attention-TP group a token's cache is kept by: TP, or TP/DP with DP attention.
	AttnTP int `json:"attention_tp"`
	// DPRanks is how many attention data-parallel ranks the server has, each keeping only its
	// own requests' tokens (1 without DP attention): a server holds DPRanks times the tokens of
	// one GPU.
	DPRanks int `json:"dp_ranks"`
}

// KVBytesPerToken returns the KV-cache bytes of one token on one GPU of the attention-TP group
// that keeps it (p.AttnTP() GPUs: TP, or TP/DP with DP attention), following SGLang's memory pools and vLLM's cache specs (docs/SERVING.md):
//   - MLA: kv_lora_rank + qk_rope_head_dim elements per layer; an FP8 cache has no scales.
//   - MLA with the indexer (DSA): BF16 as MLA; FP8 stores the latent as FP8 with a float32 scale
//     per 128 values and the rope part in BF16 (656 bytes for 512 + 64); the indexer key adds
//     index_head_dim bytes plus a float32 scale per 128.
//   - GQA: K and V of max(1, kv_heads / attention TP) heads per layer.
func (m Model) KVBytesPerToken(dt KVDType, p Parallel) (KVCost, error) {
	tp := p.AttnTP()
	if p.TP <= 0 || p.DP < 0 || tp <= 0 || p.TP%p.DPRanks() != 0 {
		return KVCost{}, fmt.Errorf("%w: tensor parallel size %d with DP %d", ErrOptions, p.TP, p.DP)
	}
	elem := int64(2)
	if dt == KVFP8 {
		elem = 1
	} else if dt != KVBF16 {
		return KVCost{}, fmt.Errorf("%w: KV-cache dtype %q", ErrOptions, dt)
	}
	c := KVCost{Attention: m.Attention(), DType: dt, Layers: m.Layers, Replicated: m.KVLoraRank > 0, AttnTP: tp, DPRanks: p.DPRanks()}
	lora, rope := int64(m.KVLoraRank), int64(m.QKRope)
	switch c.Attention {
	case AttnMLA:
		c.LayerBytes = (lora + rope) * elem
	case AttnMLAIndexer:
		c.LayerBytes = (lora + rope) * elem
		if dt == KVFP8 {
			if m.KVLoraRank%blockQuant != 0 {
				return KVCost{}, fmt.Errorf("%w: kv_lora_rank %d is not a multiple of %d (FP8 DSA cache)", ErrConfig, m.KVLoraRank, blockQuant)
			}
			c.LayerBytes = lora + lora/blockQuant*4 + rope*2
		}
		c.IndexerBytes = int64(m.IndexHead) + int64(m.IndexHead/blockQuant)*4
	case AttnGQA:
		heads := m.KVHeads / tp
		if m.KVHeads < tp {
			heads = 1 // each rank keeps a copy of one head
		} else if m.KVHeads%tp != 0 {
			return KVCost{}, fmt.Errorf("%w: %d key-value heads do not split across attention TP %d", ErrOptions, m.KVHeads, tp)
		}
		c.LayerBytes = int64(heads) * int64(m.HeadDim+m.VHeadDim) * elem
	}
	c.PerToken = (c.LayerBytes + c.IndexerBytes) * int64(c.Layers)
	return c, nil
}
