package serving

import (
	"strings"
	"testing"
)

// TestDefaultMemFraction checks the SGLang heuristic against hand computations of
// server_args.py's formula (reserved MiB = 512 + 1.5 x activation tokens + TP/8 x 1024 + graphs,
// at least 10 GiB on GPUs over 60 GiB).
func TestDefaultMemFraction(t *testing.T) {
	const g141 = 141 << 30 // 144384 MiB
	for _, tc := range []struct {
		name string
		e    Engine
		mem  int64
		tp   int
		dp   int
		role Role
		mla  bool
		want float64
	}{
		// 512 + 8192*1.5 + 1024 + 512*2 (decode graphs) + 1536 (MLA prefill graphs) = 16384 MiB.
		{"unified MLA", SGLang, g141, 8, 0, RoleUnified, true, 0.887},
		// 512 + 12288 + 1024 + 1536 = 15360 MiB.
		{"prefill MLA", SGLang, g141, 8, 0, RolePrefill, true, 0.894},
		// 512 + 2048*1.5 + 1024 + 1024 = 5632 MiB, raised to the 10 GiB floor.
		{"decode", SGLang, g141, 8, 0, RoleDecode, true, 0.929},
		// 58 prefill graph sizes up to 8192 tokens x 8 MiB = 464: 512 + 12288 + 1024 + 464 = 14288 MiB.
		{"prefill GQA", SGLang, g141, 8, 0, RolePrefill, false, 0.901},
		// 80 GiB: the 10 GiB floor for decode: (81920 - 10240) / 81920.
		{"decode 80GiB", SGLang, 80 << 30, 8, 0, RoleDecode, true, 0.875},
		{"vllm", VLLM, g141, 8, 0, RoleDecode, true, 0.9},
		{"vllm DP8", VLLM, g141, 8, 8, RoleDecode, true, 0.9},
		// DP attention, decode: 512 + 2048*1.5 + 1024 + 512*2 + 512*8*3 + 512*8*1.5 (over 300
		// slots) = 24064 MiB: (144384 - 24064) / 144384 = 0.8333.
		{"decode DP8", SGLang, g141, 8, 8, RoleDecode, true, 0.833},
		// DP2: 512 + 3072 + 1024 + 1024 + 3072 + 1536 = 10240 MiB, the floor anyway.
		{"decode DP2", SGLang, g141, 8, 2, RoleDecode, true, 0.929},
		// DP4: 512 + 3072 + 1024 + 1024 + 6144 + 3072 = 14848 MiB: 0.8972.
		{"decode DP4", SGLang, g141, 8, 4, RoleDecode, true, 0.897},
		// Unified DP8: 16384 + 18432 = 34816 MiB: 0.7589.
		{"unified DP8", SGLang, g141, 8, 8, RoleUnified, true, 0.759},
		// Prefill reserves nothing for DP attention (no decode graphs): as without DP.
		{"prefill DP8", SGLang, g141, 8, 8, RolePrefill, true, 0.894},
	} {
		if got := DefaultMemFraction(tc.e, tc.mem, Parallel{TP: tc.tp, EP: 1, DP: tc.dp}, tc.role, tc.mla); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := len(prefillGraphSizes(8192)); n != 58 {
		t.Errorf("%d prefill graph sizes up to 8192, want 58", n)
	}
}

func TestPlanCapacity(t *testing.T) {
	kv := KVCost{PerToken: 1 << 20}
	b := Budget{GPUMemory: 100 << 30, MemFraction: 0.9, Reserve: 2 << 30}
	c := Plan(RoleDecode, b, Weights{PerGPU: 60 << 30}, kv, 4096)
	// 90 - 60 - 2 = 28 GiB of 1 MiB tokens.
	if c.KVBytes != 28<<30 || c.Tokens != 28<<10 || !c.Fits() || c.Sequences != 7 {
		t.Errorf("capacity %+v", c)
	}
	// DP attention, 4 ranks: each GPU keeps only its rank's tokens, so the server holds 4 times
	// one GPU's 28 Ki tokens; a 16384-token sequence fits one rank's 28672, a 32768 one does not.
	dp := KVCost{PerToken: 1 << 20, DPRanks: 4}
	c = Plan(RoleDecode, b, Weights{PerGPU: 60 << 30}, dp, 16384)
	if c.TokensPerRank != 28<<10 || c.Tokens != 4*28<<10 || !c.Fits() || c.Sequences != 7 {
		t.Errorf("DP4 capacity %+v", c)
	}
	if c = Plan(RoleDecode, b, Weights{PerGPU: 60 << 30}, dp, 32768); c.Fits() || !strings.Contains(c.Problems[0], "per DP rank") {
		t.Errorf("a sequence longer than one rank holds: %+v", c)
	}
	c = Plan(RoleDecode, b, Weights{PerGPU: 89 << 30}, kv, 4096)
	if c.Fits() || !strings.Contains(c.Problems[0], "weights do not fit") || c.Tokens != 0 {
		t.Errorf("over budget: %+v", c)
	}
	c = Plan(RoleDecode, b, Weights{PerGPU: 85 << 30}, kv, 8192)
	if c.Fits() || !strings.Contains(c.Problems[0], "less than one 8192-token sequence") {
		t.Errorf("3 GiB for an 8192-token sequence of 1 MiB tokens: %+v", c)
	}
}
