package engines_test

import (
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/quantize/rules"
)

// withConfig is in with its config.json changed by edit (a copy; the tensors are shared).
func withConfig(in engines.Input, edit func(map[string]any)) engines.Input {
	in.Config = rules.CloneConfig(in.Config)
	edit(in.Config)
	return in
}

// TestSGLangGLM4FusionRule: SGLang's Glm4MoeForCausalLM (glm4_moe.py
// determine_num_fused_shared_experts) fuses the shared expert whatever the routed expert count,
// where DeepSeek-V3's rule asks for 256; with more than one shared expert its loader's
// "num_fused_shared_experts == 1" assertion fails, so even a checkpoint whose experts share one
// scheme needs --disable-shared-experts-fusion.
func TestSGLangGLM4FusionRule(t *testing.T) {
	routed := func(n int) func(map[string]any) { return func(c map[string]any) { c["n_routed_experts"] = float64(n) } }
	shared := func(n int) func(map[string]any) { return func(c map[string]any) { c["n_shared_experts"] = float64(n) } }
	glm := layout(t, "glm-4.7.official.json", false, convert.Options{}, nil)
	ds := layout(t, "deepseek-v3.json", false, convert.Options{}, nil)
	for _, tc := range []struct {
		name string
		in   engines.Input
		want bool
	}{
		{"glm-4.7 decode, 64 routed experts", withConfig(glm.decode, routed(64)), true},
		{"deepseek-v3 decode, 64 routed experts", withConfig(ds.decode, routed(64)), false},
		{"glm-4.7 prefill, 1 shared expert", glm.prefill, false},
		{"glm-4.7 prefill, 2 shared experts", withConfig(glm.prefill, shared(2)), true},
		{"glm-4.7 decode, no shared expert", withConfig(glm.decode, shared(0)), false},
	} {
		r := engines.Check(engines.SGLang, tc.in, engines.Options{})
		if got := hasRule(r, "shared-expert-fusion", ""); got != tc.want {
			t.Errorf("%s: fusion finding %v, want %v (%v)", tc.name, got, tc.want, r.Problems)
		}
		if tc.want {
			r = engines.Check(engines.SGLang, tc.in, engines.Options{Flags: r.RequiredFlags()})
			if hasRule(r, "shared-expert-fusion", "") {
				t.Errorf("%s: still refused with %v", tc.name, r.RequiredFlags())
			}
		}
	}
}

// TestGLM4PackedMapping: SGLang's Glm4MoeForCausalLM registers no packed_modules_mapping; vLLM's
// maps qkv_proj and gate_up_proj back to their parts (glm4_moe.py of each).
func TestGLM4PackedMapping(t *testing.T) {
	if m := engines.PackedMapping(engines.SGLang, engines.FamilyGLM4, false); len(m) != 0 {
		t.Errorf("SGLang GLM-4: %v, want none", m)
	}
	m := engines.PackedMapping(engines.VLLM, engines.FamilyGLM4, false)
	if len(m) != 2 || len(m["qkv_proj"]) != 3 || m["qkv_proj"][2] != "v_proj" || len(m["gate_up_proj"]) != 2 || m["gate_up_proj"][1] != "up_proj" {
		t.Errorf("vLLM GLM-4: %v", m)
	}
}
