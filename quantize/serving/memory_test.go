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
		role Role
		mla  bool
		want float64
	}{
		// 512 + 8192*1.5 + 1024 + 512*2 (decode graphs) + 1536 (MLA prefill graphs) = 16384 MiB.
		{"unified MLA", SGLang, g141, 8, RoleUnified, true, 0.887},
		// 512 + 12288 + 1024 + 1536 = 15360 MiB.
		{"prefill MLA", SGLang, g141, 8, RolePrefill, true, 0.894},
		// 512 + 2048*1.5 + 1024 + 1024 = 5632 MiB, raised to the 10 GiB floor.
		{"decode", SGLang, g141, 8, RoleDecode, true, 0.929},
		// 58 prefill graph sizes up to 8192 tokens x 8 MiB = 464: 512 + 12288 + 1024 + 464 = 14288 MiB.
		{"prefill GQA", SGLang, g141, 8, RolePrefill, false, 0.901},
		// 80 GiB: the 10 GiB floor for decode: (81920 - 10240) / 81920.
		{"decode 80GiB", SGLang, 80 << 30, 8, RoleDecode, true, 0.875},
		{"vllm", VLLM, g141, 8, RoleDecode, true, 0.9},
	} {
		if got := DefaultMemFraction(tc.e, tc.mem, tc.tp, tc.role, tc.mla); got != tc.want {
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
	c = Plan(RoleDecode, b, Weights{PerGPU: 89 << 30}, kv, 4096)
	if c.Fits() || !strings.Contains(c.Problems[0], "weights do not fit") || c.Tokens != 0 {
		t.Errorf("over budget: %+v", c)
	}
	c = Plan(RoleDecode, b, Weights{PerGPU: 85 << 30}, kv, 8192)
	if c.Fits() || !strings.Contains(c.Problems[0], "less than one 8192-token sequence") {
		t.Errorf("3 GiB for an 8192-token sequence of 1 MiB tokens: %+v", c)
	}
}
