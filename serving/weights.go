package serving

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

// Tensor is one tensor of a checkpoint: its name, shape and size in the file.
type Tensor struct {
	Name  string
	Shape []int64
	Bytes int64
}

// Parallel is how one server splits the model across its GPUs.
type Parallel struct {
	// TP is the GPUs of one server: SGLang's --tp-size; vLLM's --tensor-parallel-size times
	// --data-parallel-size. The routed experts are split across all of them.
	TP int
	EP int // expert-parallel size (1: experts split by TP); must divide TP
	// DP is the attention data-parallel size (0 or 1: off). With DP attention each of the DP
	// ranks serves its own requests and keeps their KV cache; attention runs tensor-parallel
	// inside an attention-TP group of TP/DP GPUs (SGLang --enable-dp-attention --dp-size DP;
	// vLLM --data-parallel-size DP --tensor-parallel-size TP/DP).
	DP int
	// DPLMHead splits lm_head across the attention-TP group instead of all TP GPUs (SGLang
	// --enable-dp-lm-head; needs DP > 1).
	DPLMHead bool
	// Engine says whose placement rules apply where they differ under DP attention (empty:
	// SGLang's): SGLang keeps the dense MLP layers and shared experts split across all TP GPUs
	// and the embedding whole on every GPU; vLLM splits them, and the embedding, across the
	// attention-TP group (its --tensor-parallel-size).
	Engine Engine
}

// DPRanks is the attention data-parallel size, 1 without DP attention.
func (p Parallel) DPRanks() int { return max(p.DP, 1) }

// AttnTP is the size of the attention-TP group: TP/DP, TP without DP attention.
func (p Parallel) AttnTP() int { return p.TP / p.DPRanks() }

// Validate checks the sizes against each other and the model.
func (p Parallel) Validate(m Model) error {
	switch {
	case p.TP <= 0 || p.EP <= 0 || p.DP < 0:
		return fmt.Errorf("%w: TP %d and EP %d must be positive, DP %d not negative", ErrOptions, p.TP, p.EP, p.DP)
	case p.TP%p.EP != 0:
		return fmt.Errorf("%w: EP %d does not divide TP %d (the engines run EP inside the TP group)", ErrOptions, p.EP, p.TP)
	case p.TP%p.DPRanks() != 0:
		return fmt.Errorf("%w: DP %d does not divide TP %d (DP attention runs TP/DP-way attention-TP groups inside the TP group)", ErrOptions, p.DP, p.TP)
	case p.DPLMHead && p.DPRanks() == 1:
		return fmt.Errorf("%w: the DP LM head needs DP attention (DP > 1)", ErrOptions)
	case p.DPLMHead && p.Engine == VLLM:
		return fmt.Errorf("%w: the DP LM head is an SGLang option (vLLM splits lm_head across each DP rank's TP group anyway)", ErrOptions)
	case p.Engine == VLLM && p.EP != 1 && p.EP != p.TP:
		return errVLLMEP(p)
	case m.Experts > 0 && m.Experts%p.EP != 0:
		return fmt.Errorf("%w: %d routed experts do not split across EP %d", ErrOptions, m.Experts, p.EP)
	case m.Heads%p.AttnTP() != 0:
		return fmt.Errorf("%w: %d attention heads do not split across attention TP %d (TP %d / DP %d)", ErrOptions, m.Heads, p.AttnTP(), p.TP, p.DPRanks())
	}
	return nil
}

// errVLLMEP: vLLM has no EP size between 1 and all GPUs of the server.
func errVLLMEP(p Parallel) error {
	return fmt.Errorf("%w: vLLM's expert parallelism (--enable-expert-parallel) spans all GPUs of the server (TP x DP): EP must be 1 or %d, not %d",
		ErrOptions, p.TP, p.EP)
}

// Ways is how many ways a tensor of split s is cut on the GPUs of the server (1: whole on each).
// Routed experts are cut TP/EP ways (and spread E/EP per rank); not-loaded tensors count 0.
func (p Parallel) Ways(s Split) int {
	dp := p.DPRanks() > 1
	switch s {
	case SplitAttention, SplitKVHeads:
		return p.AttnTP()
	case SplitTP:
		if dp && p.Engine == VLLM {
			return p.AttnTP()
		}
		return p.TP
	case SplitVocab:
		switch {
		case dp && p.Engine == VLLM:
			return p.AttnTP()
		case dp:
			return 1 // SGLang: VocabParallelEmbedding(enable_tp=not dp attention)
		}
		return p.TP
	case SplitLMHead:
		if dp && (p.Engine == VLLM || p.DPLMHead) {
			return p.AttnTP()
		}
		return p.TP
	case SplitExperts:
		return p.TP / p.EP
	case SplitNotLoaded:
		return 0
	}
	return 1
}

// Split says how the engines place one tensor on the GPUs of a server.
type Split string

// The splits.
const (
	SplitTP         Split = "tensor_parallel"   // dense MLP layers, shared experts: 1/TP on every GPU (vLLM with DP: 1/attention TP)
	SplitAttention  Split = "attention_heads"   // attention up- and output projections: 1/attention TP (TP/DP) on every GPU
	SplitExperts    Split = "experts"           // routed experts: E/EP experts per EP rank, each cut TP/EP ways
	SplitVocab      Split = "vocab_parallel"    // embed_tokens: vocabulary padded to 64 rows, cut TP ways (SGLang with DP: whole)
	SplitLMHead     Split = "lm_head"           // lm_head: vocabulary padded to 64 rows, cut TP ways (attention TP with a DP LM head)
	SplitKVHeads    Split = "kv_heads"          // GQA k/v: max(1, kv_heads/attention TP) heads per GPU
	SplitReplicated Split = "replicated"        // whole on every GPU
	SplitNotLoaded  Split = "not_loaded_no_mtp" // MTP layers: loaded only as a speculative-decoding draft
)

// vocabPad is the row padding of the engines' vocabulary-parallel embeddings.
const vocabPad = 64

var (
	reLayer  = regexp.MustCompile(`^model\.layers\.(\d+)\.`)
	reExpert = regexp.MustCompile(`\.experts\.(\d+)\.`)
	// Attention Linears split across TP (column-parallel by heads or row-parallel into the
	// hidden size); the MLA down-projections and the indexer are replicated in both engines.
	reAttnTP    = regexp.MustCompile(`\.(q_b_proj|kv_b_proj|o_proj|q_proj|qkv_proj|dense)\.`)
	reAttnKV    = regexp.MustCompile(`\.(k_proj|v_proj)\.`)
	reIndexer   = regexp.MustCompile(`\.indexer\.`)
	reMTPModule = regexp.MustCompile(`\.(eh_proj|enorm|hnorm)\.`)
)

// SplitOf returns how the engines place tensor name of model m.
func (m Model) SplitOf(name string) Split {
	if g := reLayer.FindStringSubmatch(name); g != nil {
		if l, err := strconv.Atoi(g[1]); err == nil && l >= m.Layers {
			return SplitNotLoaded
		}
	}
	switch rules.RoleOf(name) {
	case rules.RoleRoutedExpert:
		return SplitExperts
	case rules.RoleSharedExpert, rules.RoleDenseMLP:
		return SplitTP
	case rules.RoleEmbedding:
		if strings.HasPrefix(name, "lm_head.") {
			return SplitLMHead
		}
		return SplitVocab
	case rules.RoleAttention:
		switch {
		case reIndexer.MatchString(name):
			return SplitReplicated
		case reAttnTP.MatchString(name):
			return SplitAttention
		case reAttnKV.MatchString(name):
			return SplitKVHeads
		}
	case rules.RoleOther:
		if reMTPModule.MatchString(name) {
			return SplitNotLoaded
		}
	}
	return SplitReplicated // norms, router, and anything unknown (the safe side for "fits")
}

// Weights is what one GPU of a server holds of a checkpoint.
type Weights struct {
	PerGPU int64 `json:"per_gpu_bytes"`
	// BySplit is PerGPU by placement rule.
	BySplit map[Split]int64 `json:"per_gpu_by_split"`
	// NotLoaded is the checkpoint's MTP bytes, which no GPU loads without speculative decoding.
	NotLoaded int64 `json:"mtp_bytes_not_loaded,omitempty"`
	// Total is the checkpoint's tensor bytes.
	Total int64 `json:"total_bytes"`
}

// PerGPUWeights returns the bytes the busiest GPU of a server holds. Scale companions split with
// their weight; sizes that do not divide round up.
func (m Model) PerGPUWeights(ts []Tensor, p Parallel) (Weights, error) {
	if err := p.Validate(m); err != nil {
		return Weights{}, err
	}
	w := Weights{BySplit: map[Split]int64{}}
	perRank := 0 // experts per EP rank
	if m.Experts > 0 {
		perRank = m.Experts / p.EP
	}
	// Routed experts live on EP ranks in contiguous ranges; the plan counts EP rank 0's share
	// per layer and module, which is the largest when all experts are alike.
	experts := map[int]int64{} // EP rank -> bytes (after the TP/EP cut)
	for _, t := range ts {
		w.Total += t.Bytes
		split := m.SplitOf(t.Name)
		ways := int64(p.Ways(split))
		var n int64
		switch split {
		case SplitNotLoaded:
			w.NotLoaded += t.Bytes
			continue
		case SplitVocab, SplitLMHead:
			n = ceilDiv(t.Bytes, ways)
			if len(t.Shape) > 0 && t.Shape[0] > 0 {
				rows := t.Shape[0]
				padded := ceilDiv(rows, vocabPad) * vocabPad
				n = ceilDiv(t.Bytes, rows) * ceilDiv(padded, ways)
			}
		case SplitKVHeads:
			n = ceilDiv(t.Bytes, ways)
			if m.KVHeads > 0 && int64(m.KVHeads) < ways {
				n = ceilDiv(t.Bytes, int64(m.KVHeads)) // one head, copied on several ranks
			}
		case SplitExperts:
			g := reExpert.FindStringSubmatch(t.Name)
			e, err := strconv.Atoi(g[1])
			if err != nil || perRank == 0 {
				return Weights{}, fmt.Errorf("%w: expert tensor %q without n_routed_experts", ErrConfig, t.Name)
			}
			experts[e/perRank] += ceilDiv(t.Bytes, ways)
			continue
		default:
			n = ceilDiv(t.Bytes, ways)
		}
		w.BySplit[split] += n
	}
	var most int64
	for _, b := range experts {
		most = max(most, b)
	}
	if most > 0 {
		w.BySplit[SplitExperts] = most
	}
	for _, b := range w.BySplit {
		w.PerGPU += b
	}
	return w, nil
}

// ExpertWidthProblems names the expert widths per rank that the engines' MoE kernels reject:
// FP8 128x128 blocks need moe_intermediate_size / (TP/EP) to be a multiple of 128, INT4 groups a
// multiple of max(64, group) (FORMATS.md §4, §5). fp8 and int4Group say which the checkpoint has
// (int4Group 0: no INT4 experts).
func (m Model) ExpertWidthProblems(p Parallel, fp8 bool, int4Group int) []string {
	moeTP := p.TP / p.EP
	if m.MoEInter <= 0 || moeTP <= 0 {
		return nil
	}
	var out []string
	check := func(what string, mult int) {
		if m.MoEInter%moeTP != 0 || (m.MoEInter/moeTP)%mult != 0 {
			out = append(out, fmt.Sprintf("%s: moe_intermediate_size %d / %d expert-TP ranks = %s per rank, not a multiple of %d; raise EP",
				what, m.MoEInter, moeTP, strconv.FormatFloat(float64(m.MoEInter)/float64(moeTP), 'g', -1, 64), mult))
		}
	}
	if fp8 {
		check("FP8 block experts", blockQuant)
	}
	if int4Group > 0 {
		check(fmt.Sprintf("INT4 g%d experts", int4Group), max(64, int4Group))
	}
	return out
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// String names a split for people.
func (s Split) String() string { return strings.ReplaceAll(string(s), "_", " ") }
