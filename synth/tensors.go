package synth

import "fmt"

// Kind says what a tensor holds, which decides its values and whether an FP8-block checkpoint
// stores it as FP8.
type Kind int

// Tensor kinds.
const (
	KindLinear Kind = iota // a Linear weight [out, in]: FP8 in FP8-block checkpoints
	KindDense              // a 2-D weight that checkpoints keep in BF16 (embeddings, head, router, eh_proj)
	KindNorm               // a norm weight: values near 1
	KindBias               // a bias or the router's score correction: small values
)

// Tensor is one tensor of a generated model, before any dtype is chosen.
type Tensor struct {
	Name  string
	Shape []int64
	Kind  Kind
	F32   bool // stored as F32 whatever the checkpoint dtype (router correction bias)
}

// Tensors lists every tensor of the model in the order a checkpoint stores them: embeddings, then
// layer by layer (MTP layers last), then the final norm and the head.
func (m Model) Tensors() []Tensor {
	var ts []Tensor
	add := func(kind Kind, name string, shape ...int) {
		s := make([]int64, len(shape))
		for i, d := range shape {
			s[i] = int64(d)
		}
		ts = append(ts, Tensor{Name: name, Shape: s, Kind: kind})
	}
	lin := func(name string, out, in int) { add(KindLinear, name+".weight", out, in) }
	h := m.Hidden
	add(KindDense, "model.embed_tokens.weight", m.Vocab, h)
	for l := 0; l < m.Layers+m.MTPLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		mtp := l >= m.Layers
		if mtp {
			add(KindNorm, p+"enorm.weight", h)
			add(KindNorm, p+"hnorm.weight", h)
			add(KindDense, p+"eh_proj.weight", h, 2*h)
		}
		add(KindNorm, p+"input_layernorm.weight", h)
		m.attention(p+"self_attn.", add, lin)
		add(KindNorm, p+"post_attention_layernorm.weight", h)
		if l < m.DenseLayers {
			lin(p+"mlp.gate_proj", m.Intermediate, h)
			lin(p+"mlp.up_proj", m.Intermediate, h)
			lin(p+"mlp.down_proj", h, m.Intermediate)
		} else {
			add(KindDense, p+"mlp.gate.weight", m.Experts, h)
			add(KindBias, p+"mlp.gate.e_score_correction_bias", m.Experts)
			ts[len(ts)-1].F32 = true
			for e := 0; e < m.Experts; e++ {
				q := fmt.Sprintf("%smlp.experts.%d.", p, e)
				lin(q+"gate_proj", m.MoEIntermediate, h)
				lin(q+"up_proj", m.MoEIntermediate, h)
				lin(q+"down_proj", h, m.MoEIntermediate)
			}
			if m.SharedExperts > 0 {
				si := m.MoEIntermediate * m.SharedExperts
				lin(p+"mlp.shared_experts.gate_proj", si, h)
				lin(p+"mlp.shared_experts.up_proj", si, h)
				lin(p+"mlp.shared_experts.down_proj", h, si)
			}
		}
		if mtp {
			add(KindNorm, p+"shared_head.norm.weight", h)
			add(KindDense, p+"shared_head.head.weight", m.Vocab, h)
		}
	}
	add(KindNorm, "model.norm.weight", h)
	add(KindDense, "lm_head.weight", m.Vocab, h)
	return ts
}

func (m Model) attention(p string, add func(Kind, string, ...int), lin func(string, int, int)) {
	h := m.Hidden
	if m.Style == StyleGLM4 {
		q, kv := m.Heads*m.HeadDim, m.KVHeads*m.HeadDim
		lin(p+"q_proj", q, h)
		lin(p+"k_proj", kv, h)
		lin(p+"v_proj", kv, h)
		if m.AttentionBias {
			add(KindBias, p+"q_proj.bias", q)
			add(KindBias, p+"k_proj.bias", kv)
			add(KindBias, p+"v_proj.bias", kv)
		}
		lin(p+"o_proj", h, q)
		return
	}
	qk := m.QKNope + m.QKRope
	lin(p+"q_a_proj", m.QLoraRank, h)
	add(KindNorm, p+"q_a_layernorm.weight", m.QLoraRank)
	lin(p+"q_b_proj", m.Heads*qk, m.QLoraRank)
	lin(p+"kv_a_proj_with_mqa", m.KVLoraRank+m.QKRope, h)
	add(KindNorm, p+"kv_a_layernorm.weight", m.KVLoraRank)
	lin(p+"kv_b_proj", m.Heads*(m.QKNope+m.VHead), m.KVLoraRank)
	lin(p+"o_proj", h, m.Heads*m.VHead)
	if m.IndexHeads > 0 {
		lin(p+"indexer.wq_b", m.IndexHeads*m.IndexHeadDim, m.QLoraRank)
		lin(p+"indexer.wk", m.IndexHeadDim, h)
		add(KindNorm, p+"indexer.k_norm.weight", m.IndexHeadDim)
		add(KindBias, p+"indexer.k_norm.bias", m.IndexHeadDim)
		add(KindDense, p+"indexer.weights_proj.weight", m.IndexHeads, h)
	}
}
