package serving

import (
	"fmt"
	"math"
)

// Engine is a serving engine whose rules a plan follows.
type Engine string

// The engines, at the releases docs/SERVING.md cites.
const (
	SGLang Engine = "sglang"
	VLLM   Engine = "vllm"
)

// ParseEngine accepts sglang and vllm.
func ParseEngine(s string) (Engine, error) {
	switch Engine(s) {
	case SGLang, VLLM:
		return Engine(s), nil
	}
	return "", fmt.Errorf("%w: engine %q (want sglang or vllm)", ErrOptions, s)
}

// Role is what a server does in a deployment.
type Role string

// The roles: SGLang's --disaggregation-mode null, prefill and decode.
const (
	RoleUnified Role = "unified"
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
)

const mib = 1 << 20

// DefaultMemFraction is the fraction of GPU memory the engine gives to weights plus KV cache
// when not told otherwise: vLLM's --gpu-memory-utilization default 0.9; SGLang's
// --mem-fraction-static heuristic (server_args.py _handle_gpu_memory_settings), which reserves
// memory for activations (1.5 MiB per token of the chunked-prefill size, or of the decode batch)
// and CUDA graphs (2 MiB per decode batch slot; 1.5 GiB for MLA prefill graphs), at least 10 GiB
// on GPUs over 60 GiB. With DP attention a server that decodes also reserves 3 MiB per decode
// batch slot and DP rank for padding, 4.5 MiB over 300 slots (reserve_for_graph_mb). p.TP is
// SGLang's --tp-size.
func DefaultMemFraction(e Engine, gpuMemory int64, p Parallel, role Role, mla bool) float64 {
	if e == VLLM {
		return 0.9
	}
	tp := p.TP
	gpu := float64(gpuMemory) / mib
	chunk, maxBS := 8192, 512
	if tp < 4 {
		maxBS = 256
	}
	switch {
	case gpu < 20*1024:
		chunk, maxBS = 2048, 8
	case gpu < 35*1024:
		chunk, maxBS = 2048, 80
		if tp < 4 {
			maxBS = 24
		}
	case gpu < 60*1024:
		chunk, maxBS = 4096, 160
		if tp < 4 {
			maxBS = 32
		}
	case gpu >= 160*1024:
		chunk, maxBS = 16384, 512
	}
	activation := max(chunk, 2048)
	if role == RoleDecode {
		activation = max(maxBS, 2048)
	}
	reserved := 512 + float64(activation)*1.5 + float64(tp)/8*1024
	if role != RolePrefill {
		reserved += float64(maxBS) * 2
		if dp := p.DPRanks(); dp > 1 {
			reserved += float64(maxBS*dp) * 3
			if maxBS > 300 {
				reserved += float64(maxBS*dp) * 1.5
			}
		}
	}
	if role != RoleDecode {
		if mla {
			reserved += 1.5 * 1024
		} else {
			reserved += float64(len(prefillGraphSizes(chunk))) * 8
		}
	}
	if gpu > 60*1024 {
		reserved = max(reserved, 10*1024)
	}
	return math.Round((gpu-reserved)/gpu*1000) / 1000
}

// prefillGraphSizes are SGLang's prefill CUDA-graph token counts up to maxBS.
func prefillGraphSizes(maxBS int) []int {
	var s []int
	for _, r := range [][3]int{{4, 32, 4}, {48, 256, 16}, {288, 512, 32}, {576, 1024, 64}, {1280, 4096, 256}, {4608, maxBS, 512}} {
		for v := r[0]; v <= r[1] && v <= maxBS; v += r[2] {
			s = append(s, v)
		}
	}
	return s
}

// DefaultReserve is the assumed memory inside the engine's fraction that holds neither weights nor
// KV cache. SGLang measures free memory after the CUDA context and communicators are up, so only
// their share counts (assumed 1 GiB); vLLM's fraction also holds the profiled activation peak and
// the CUDA graphs (assumed 6 GiB in all). Neither is known before the engine runs: a flag sets it.
func DefaultReserve(e Engine) int64 {
	if e == VLLM {
		return 6 << 30
	}
	return 1 << 30
}

// Budget is one GPU's memory and how the engine divides it.
type Budget struct {
	GPUMemory   int64   // bytes of one GPU
	MemFraction float64 // weights + KV cache share (SGLang --mem-fraction-static, vLLM --gpu-memory-utilization)
	Reserve     int64   // inside the fraction, neither weights nor KV cache (an assumption)
}

// Capacity is the serving plan of one checkpoint on one server.
type Capacity struct {
	Role        Role    `json:"role"`
	MemFraction float64 `json:"mem_fraction"`
	Reserve     int64   `json:"reserve_bytes"`
	Weights     Weights `json:"weights"`
	KV          KVCost  `json:"kv"`
	// KVBytes is the KV-cache pool of one GPU: GPUMemory x MemFraction - weights - Reserve.
	KVBytes int64 `json:"kv_bytes_per_gpu"`
	// TokensPerRank is how many tokens one attention DP rank holds: KVBytes / KV.PerToken (every
	// GPU of its attention-TP group holds its share of each).
	TokensPerRank int64 `json:"tokens_per_dp_rank"`
	// Tokens is how many tokens of context the server holds: TokensPerRank x KV.DPRanks.
	Tokens int64 `json:"tokens"`
	// Sequences is Tokens / SeqLen: full-length sequences at once. A sequence lives on one DP
	// rank, so one must fit in TokensPerRank.
	Sequences float64 `json:"sequences"`
	SeqLen    int     `json:"seq_len"`
	// Problems say why the plan cannot work (weights over budget, less than one sequence).
	Problems []string `json:"problems,omitempty"`
}

// Fits reports whether the server can run at all.
func (c Capacity) Fits() bool { return len(c.Problems) == 0 }

// Plan computes the capacity of a server that holds w with KV cost kv. seqLen is the length
// one request may reach (0: no sequence check).
func Plan(role Role, b Budget, w Weights, kv KVCost, seqLen int) Capacity {
	c := Capacity{Role: role, MemFraction: b.MemFraction, Reserve: b.Reserve, Weights: w, KV: kv, SeqLen: seqLen}
	static := int64(float64(b.GPUMemory) * b.MemFraction)
	c.KVBytes = static - w.PerGPU - b.Reserve
	if c.KVBytes <= 0 {
		c.Problems = append(c.Problems, fmt.Sprintf("weights do not fit: %.2f GiB per GPU + %.2f GiB reserve > %.2f GiB (%.3f of %.2f GiB)",
			gib(w.PerGPU), gib(b.Reserve), gib(static), b.MemFraction, gib(b.GPUMemory)))
		c.KVBytes = 0
		return c
	}
	if kv.PerToken > 0 {
		c.TokensPerRank = c.KVBytes / kv.PerToken
		c.Tokens = c.TokensPerRank * int64(max(kv.DPRanks, 1))
	}
	if seqLen > 0 {
		c.Sequences = float64(c.Tokens) / float64(seqLen)
		if c.TokensPerRank < int64(seqLen) {
			where := ""
			if kv.DPRanks > 1 {
				where = " per DP rank"
			}
			c.Problems = append(c.Problems, fmt.Sprintf("KV cache for %d tokens%s, less than one %d-token sequence", c.TokensPerRank, where, seqLen))
		}
	}
	return c
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }
