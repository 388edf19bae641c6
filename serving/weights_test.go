package serving

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// headerOnlyPlan lays out a full-size header-only FP8 checkpoint of a real config (sparse files
// that cost no disk) and plans its conversion with INT4 g32 experts.
func headerOnlyPlan(t *testing.T, config string) (*convert.Plan, synth.Model) {
	t.Helper()
	ck, cfg, m := headerOnlyLayout(t, config)
	return planGroup(t, ck, cfg, 32), m
}

// layouts caches the header-only layouts across the tests of the package (laying one out takes
// seconds); TestMain removes them.
var layouts = struct {
	sync.Mutex
	root     string
	byConfig map[string]*layoutEntry
}{byConfig: map[string]*layoutEntry{}}

type layoutEntry struct {
	ck  *safetensors.Checkpoint
	cfg map[string]any
	m   synth.Model
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, e := range layouts.byConfig {
		e.ck.Close()
	}
	if layouts.root != "" {
		os.RemoveAll(layouts.root)
	}
	os.Exit(code)
}

// headerOnlyLayout lays out (once per package run) a full-size header-only FP8 checkpoint of a
// real config and opens it.
func headerOnlyLayout(t *testing.T, config string) (*safetensors.Checkpoint, map[string]any, synth.Model) {
	t.Helper()
	layouts.Lock()
	defer layouts.Unlock()
	if e := layouts.byConfig[config]; e != nil {
		return e.ck, e.cfg, e.m
	}
	m, err := synth.FromConfigFile(filepath.Join("..", "testdata", "configs", config))
	if err != nil {
		t.Fatal(err)
	}
	if layouts.root == "" {
		if layouts.root, err = os.MkdirTemp("", "serving-layouts"); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(layouts.root, config)
	if err := synth.Generate(context.Background(), dir, synth.Options{Model: m, FP8: true, HeaderOnly: true, MaxShardBytes: 5e9}); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.LoadConfig(dir)
	if err != nil {
		ck.Close()
		t.Fatal(err)
	}
	layouts.byConfig[config] = &layoutEntry{ck, cfg, m}
	return ck, cfg, m
}

// plans caches planGroup's plans by checkpoint directory and group size.
var plans = struct {
	sync.Mutex
	m map[string]*convert.Plan
}{m: map[string]*convert.Plan{}}

// planGroup plans the conversion of ck with INT4 experts of the given group size.
func planGroup(t *testing.T, ck *safetensors.Checkpoint, cfg map[string]any, group int) *convert.Plan {
	t.Helper()
	plans.Lock()
	defer plans.Unlock()
	key := fmt.Sprintf("%s g%d", ck.Dir, group)
	if p := plans.m[key]; p != nil {
		return p
	}
	p, err := convert.NewPlan(ck, cfg, convert.Options{GroupSize: group})
	if err != nil {
		t.Fatal(err)
	}
	plans.m[key] = p
	return p
}

// handLayout is a server layout for the hand computation, in the engines' own terms.
type handLayout struct {
	tp, ep, dp int64 // dp 1: no DP attention
	vllm       bool  // vLLM's placement (else SGLang's)
	dpLMHead   bool  // SGLang --enable-dp-lm-head
}

// handPerGPU computes by hand, from the model's dimensions and not from tensor names, what one GPU
// of a server holds of a DeepSeek-style checkpoint: FP8 128x128 blocks with float32 scales
// (source) or the decode form (routed experts INT4 g32 with BF16 scales and an int64 shape, every
// other Linear BF16). The attention up- and output projections are split across the attention-TP
// group (tp/dp GPUs), routed experts E/EP per rank and cut tp/ep ways. SGLang splits the dense
// and shared MLPs tp ways, lm_head tp ways (tp/dp with the DP LM head) and embed_tokens tp ways,
// but keeps embed_tokens whole under DP attention (VocabParallelEmbedding(enable_tp=not dp
// attention)); vLLM runs each DP rank as a tp/dp-way TP engine, so those are cut tp/dp ways.
// Embeddings and head go by vocabulary rows padded to 64; the MLA down-projections, the
// indexer, norms and the router are whole on every GPU; the MTP layers are not loaded. Every
// split tensor rounds up.
func handPerGPU(m synth.Model, decode bool, l handLayout) int64 {
	return handPerGPUAs(m, decode, convert.DecodeInt4, l)
}

// handPerGPUAs is handPerGPU with the decode checkpoint's routed experts in decode format f
// (docs/FP4.md): INT4 g32 and W4AFP8 (g128) pack-quantized with BF16 scales and an int64 shape,
// NVFP4 nibbles with an e4m3 scale per 16 and an F32 global scale, MXFP4 nibbles with a byte
// exponent per 32.
func handPerGPUAs(m synth.Model, decode bool, f convert.DecodeFormat, l handLayout) int64 {
	cd := func(a, b int64) int64 { return (a + b - 1) / b }
	blocks := func(n, k int64) int64 { return cd(n, 128) * cd(k, 128) * 4 }
	lin := func(n, k, ways int64) int64 { // a dense Linear cut ways ways
		if decode {
			return cd(2*n*k, ways)
		}
		return cd(n*k, ways) + cd(blocks(n, k), ways)
	}
	expert := func(n, k, ways int64) int64 {
		if decode {
			switch f {
			case convert.DecodeNVFP4:
				return cd(n*k/2, ways) + cd(n*k/16, ways) + cd(4, ways)
			case convert.DecodeMXFP4:
				return cd(n*k/2, ways) + cd(n*k/32, ways)
			case convert.DecodeW4AFP8:
				return cd(n*k/2, ways) + cd(n*(k/128)*2, ways) + cd(16, ways)
			}
			return cd(n*k/2, ways) + cd(n*(k/32)*2, ways) + cd(16, ways)
		}
		return cd(n*k, ways) + cd(blocks(n, k), ways)
	}
	attn := l.tp / l.dp
	mlp, embed, head := l.tp, l.tp, l.tp
	switch {
	case l.dp > 1 && l.vllm:
		mlp, embed, head = attn, attn, attn
	case l.dp > 1:
		embed = 1
		if l.dpLMHead {
			head = attn
		}
	}
	h, v := int64(m.Hidden), int64(m.Vocab)
	heads, qr, kvr := int64(m.Heads), int64(m.QLoraRank), int64(m.KVLoraRank)
	nope, rope, vh := int64(m.QKNope), int64(m.QKRope), int64(m.VHead)
	ih, id := int64(m.IndexHeads), int64(m.IndexHeadDim)
	e, mi, shared := int64(m.Experts), int64(m.MoEIntermediate), int64(m.MoEIntermediate*m.SharedExperts)
	inter := int64(m.Intermediate)

	padded := cd(v, 64) * 64
	total := 2*h*cd(padded, embed) + 2*h*cd(padded, head) // embed_tokens and lm_head, BF16
	total += 2 * h                                        // model.norm
	for i := 0; i < m.Layers; i++ {
		total += 2 * (2 * h) // input and post-attention norms
		total += lin(qr, h, 1) + 2*qr + lin(heads*(nope+rope), qr, attn)
		total += lin(kvr+rope, h, 1) + 2*kvr + lin(heads*(nope+vh), kvr, attn)
		total += lin(h, heads*vh, attn)
		if ih > 0 {
			total += lin(ih*id, qr, 1) + lin(id, h, 1) + 2*id + 2*id + 2*ih*h
		}
		if i < m.DenseLayers {
			total += 2*lin(inter, h, mlp) + lin(h, inter, mlp)
			continue
		}
		total += 2*e*h + 4*e // router weight (BF16) and score correction bias (F32)
		total += e / l.ep * (2*expert(mi, h, l.tp/l.ep) + expert(h, mi, l.tp/l.ep))
		total += 2*lin(shared, h, mlp) + lin(h, shared, mlp)
	}
	return total
}

// TestPerGPUWeightsHeaderOnly: per-GPU weight bytes of the generated full-size GLM-5 and Kimi-K2
// layouts, source and decode, equal the hand computation, with and without DP attention.
func TestPerGPUWeightsHeaderOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("lays out two full-size header-only checkpoints")
	}
	for _, tc := range []struct {
		config string
		l      handLayout
	}{
		{"glm-5.json", handLayout{tp: 8, ep: 1, dp: 1}},
		{"glm-5.json", handLayout{tp: 8, ep: 8, dp: 1}},
		{"glm-5.json", handLayout{tp: 4, ep: 2, dp: 1}},
		{"glm-5.json", handLayout{tp: 8, ep: 1, dp: 8}},
		{"glm-5.json", handLayout{tp: 8, ep: 8, dp: 8, dpLMHead: true}},
		{"glm-5.json", handLayout{tp: 8, ep: 1, dp: 2}},
		{"glm-5.json", handLayout{tp: 8, ep: 8, dp: 8, vllm: true}},
		{"glm-5.json", handLayout{tp: 8, ep: 1, dp: 4, vllm: true}},
		{"kimi-k2-instruct.json", handLayout{tp: 8, ep: 1, dp: 1}},
		{"kimi-k2-instruct.json", handLayout{tp: 16, ep: 16, dp: 1}},
		{"kimi-k2-instruct.json", handLayout{tp: 8, ep: 1, dp: 8}},
		{"kimi-k2-instruct.json", handLayout{tp: 16, ep: 16, dp: 4, dpLMHead: true}},
		{"kimi-k2-instruct.json", handLayout{tp: 8, ep: 8, dp: 8, vllm: true}},
	} {
		p, sm := headerOnlyPlan(t, tc.config) // laid out and planned once per config
		m, err := ModelFromConfig(p.Config)
		if err != nil {
			t.Fatal(err)
		}
		par := Parallel{TP: int(tc.l.tp), EP: int(tc.l.ep), DP: int(tc.l.dp), DPLMHead: tc.l.dpLMHead, Engine: SGLang}
		if tc.l.vllm {
			par.Engine = VLLM
		}
		for _, which := range []Checkpoint{Source, Prefill, Decode} {
			w, err := m.PerGPUWeights(Tensors(p, which), par)
			if err != nil {
				t.Fatalf("%s %+v %s: %v", tc.config, par, which, err)
			}
			want := handPerGPU(sm, which == Decode, tc.l)
			t.Logf("%s %s TP%d EP%d DP%d %s: %.2f GiB per GPU (%.2f GiB in the checkpoint, %.2f GiB MTP not loaded)",
				tc.config, par.Engine, par.TP, par.EP, par.DP, which, gib(w.PerGPU), gib(w.Total), gib(w.NotLoaded))
			if w.PerGPU != want {
				t.Errorf("%s %+v %s: %d bytes per GPU, hand computation %d (off by %d)", tc.config, par, which, w.PerGPU, want, w.PerGPU-want)
			}
			if (sm.MTPLayers > 0) != (w.NotLoaded > 0) {
				t.Errorf("%s: %d MTP layers, %d bytes not loaded", tc.config, sm.MTPLayers, w.NotLoaded)
			}
		}
	}
}

func TestSplitOf(t *testing.T) {
	m := Model{Layers: 2, Heads: 8, KVHeads: 2, HeadDim: 64, Experts: 4}
	for name, want := range map[string]Split{
		"model.layers.0.self_attn.q_a_proj.weight":             SplitReplicated,
		"model.layers.0.self_attn.kv_a_proj_with_mqa.weight":   SplitReplicated,
		"model.layers.0.self_attn.q_b_proj.weight_scale_inv":   SplitAttention,
		"model.layers.0.self_attn.kv_b_proj.weight":            SplitAttention,
		"model.layers.0.self_attn.o_proj.weight":               SplitAttention,
		"model.layers.0.self_attn.q_proj.bias":                 SplitAttention,
		"model.layers.0.self_attn.k_proj.weight":               SplitKVHeads,
		"model.layers.0.self_attn.indexer.wq_b.weight":         SplitReplicated,
		"model.layers.0.self_attn.indexer.k_norm.bias":         SplitReplicated,
		"model.layers.1.mlp.experts.3.down_proj.weight_packed": SplitExperts,
		"model.layers.1.mlp.shared_experts.up_proj.weight":     SplitTP,
		"model.layers.1.mlp.gate.weight":                       SplitReplicated,
		"model.layers.1.mlp.gate.e_score_correction_bias":      SplitReplicated,
		"model.layers.0.mlp.down_proj.weight":                  SplitTP,
		"model.layers.0.input_layernorm.weight":                SplitReplicated,
		"model.embed_tokens.weight":                            SplitVocab,
		"lm_head.weight":                                       SplitLMHead,
		"model.layers.2.eh_proj.weight":                        SplitNotLoaded,
		"model.layers.2.mlp.experts.0.up_proj.weight":          SplitNotLoaded,
	} {
		if got := m.SplitOf(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}

func TestPerGPUWeightsSmall(t *testing.T) {
	m := Model{Layers: 1, Heads: 8, KVHeads: 2, HeadDim: 64, Experts: 4}
	ts := []Tensor{
		{Name: "model.embed_tokens.weight", Shape: []int64{100, 4}, Bytes: 800}, // 100 rows pad to 128: 16 per rank at TP8
		{Name: "model.layers.0.self_attn.k_proj.weight", Shape: []int64{128, 4}, Bytes: 1024},
		{Name: "model.layers.0.self_attn.o_proj.weight", Bytes: 1001},
		{Name: "model.layers.0.mlp.experts.0.up_proj.weight", Bytes: 64},
		{Name: "model.layers.0.mlp.experts.1.up_proj.weight", Bytes: 64},
		{Name: "model.layers.0.mlp.experts.2.up_proj.weight", Bytes: 64},
		{Name: "model.layers.0.mlp.experts.3.up_proj.weight", Bytes: 64},
		{Name: "model.norm.weight", Bytes: 8},
	}
	for _, tc := range []struct {
		p    Parallel
		want int64
	}{
		// TP8: embed 8 B/row x 16 rows; k_proj: 2 KV heads < 8 ranks, one head (512 B) each;
		// o_proj ceil(1001/8); experts 4 x 64/8; norm whole.
		{Parallel{TP: 8, EP: 1}, 128 + 512 + 126 + 32 + 8},
		// EP4 inside TP8: one expert per EP rank, cut 2 ways.
		{Parallel{TP: 8, EP: 4}, 128 + 512 + 126 + 32 + 8},
		// TP2 EP2: two experts whole per rank.
		{Parallel{TP: 2, EP: 2}, 8*64 + 512 + 501 + 128 + 8},
		// SGLang DP attention TP8 DP4: attention TP2, so o_proj ceil(1001/2) and k_proj one of
		// 2 KV heads (512 B); embed_tokens whole (800 B, 100 rows padded to 128: 1024 B).
		{Parallel{TP: 8, EP: 1, DP: 4}, 1024 + 512 + 501 + 32 + 8},
		// vLLM DP4 of TP2 each: the embedding is cut 2 ways (64 rows of 8 B).
		{Parallel{TP: 8, EP: 1, DP: 4, Engine: VLLM}, 512 + 512 + 501 + 32 + 8},
	} {
		w, err := m.PerGPUWeights(ts, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if w.PerGPU != tc.want {
			t.Errorf("%+v: %d, want %d (%v)", tc.p, w.PerGPU, tc.want, w.BySplit)
		}
	}
	for _, p := range []Parallel{{TP: 8, EP: 3}, {TP: 3, EP: 1}, {TP: 8, EP: 8}, {TP: 0, EP: 1},
		{TP: 8, EP: 1, DP: 3}, {TP: 8, EP: 1, DP: -1}, {TP: 8, EP: 1, DPLMHead: true},
		{TP: 8, EP: 1, DP: 8, DPLMHead: true, Engine: VLLM}, {TP: 8, EP: 2, DP: 8, Engine: VLLM},
		{TP: 16, EP: 1, DP: 1}, // 8 heads across attention TP16
	} {
		if _, err := m.PerGPUWeights(ts, p); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", p, err)
		}
	}
}

func TestExpertWidthProblems(t *testing.T) {
	m := Model{MoEInter: 1536, Experts: 160, Heads: 96, Layers: 1}
	if got := m.ExpertWidthProblems(Parallel{TP: 8, EP: 1}, true, 32); len(got) != 1 {
		t.Errorf("GLM-4.5 1536 at TP8: FP8 192 per rank must fail, INT4 g32 pass: %q", got)
	}
	if got := m.ExpertWidthProblems(Parallel{TP: 8, EP: 8}, true, 128); len(got) != 0 {
		t.Errorf("EP8: whole experts per rank: %q", got)
	}
	if got := m.ExpertWidthProblems(Parallel{TP: 16, EP: 1}, false, 128); len(got) != 1 {
		t.Errorf("96 per rank at g128: %q", got)
	}
}
