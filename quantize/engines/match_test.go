package engines

import (
	"errors"
	"testing"
)

// TestShouldIgnore: the matching of compressed_tensors/utils.py should_ignore_layer.
func TestShouldIgnore(t *testing.T) {
	sglDS := map[string][]string{"fused_qkv_a_proj_with_mqa": {"q_a_proj", "kv_a_proj_with_mqa"}}
	for _, tc := range []struct {
		layer  string
		ignore []string
		fused  map[string][]string
		want   bool
		err    error
	}{
		// plain entries: case-insensitive substrings
		{"model.layers.0.mlp.gate_up_proj", []string{"MLP.GATE_UP"}, nil, true, nil},
		{"lm_head", []string{"lm_head"}, nil, true, nil},
		// re: entries: re.match, anchored at the start only
		{"model.layers.0.mlp.gate_up_proj", []string{`re:model\.layers\.\d+\.mlp\.gate_proj$`}, nil, false, nil},
		{"model.layers.0.mlp.gate_up_proj", []string{`re:layers\.0`}, nil, false, nil},
		{"model.layers.0.mlp.gate_up_proj", []string{`re:.*layers\.0`}, nil, true, nil},
		// a registered fused name is split back into its parts
		{"model.layers.0.self_attn.fused_qkv_a_proj_with_mqa", []string{`re:.*q_a_proj$`, `re:.*kv_a_proj_with_mqa$`}, sglDS, true, nil},
		{"model.layers.0.self_attn.fused_qkv_a_proj_with_mqa", []string{`re:.*\.q_a_proj$`}, sglDS, false, ErrMixedShards},
		// an unregistered one is matched as it is
		{"model.layers.0.mlp.gate_up_proj", []string{`re:.*gate_proj$`, `re:.*up_proj$`}, sglDS, true, nil},
		{"model.layers.0.mlp.gate_up_proj", []string{`re:.*\.gate_proj$`, `re:.*\.up_proj$`}, sglDS, false, nil},
		// the fused module named itself in the list is not split
		{"a.gate_up_proj", []string{"a.gate_up_proj"}, map[string][]string{"gate_up_proj": {"gate_proj", "up_proj"}}, true, nil},
	} {
		got, err := ShouldIgnore(tc.layer, tc.ignore, tc.fused)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ShouldIgnore(%s, %q) = %v, %v; want %v, %v", tc.layer, tc.ignore, got, err, tc.want, tc.err)
		}
	}
}

// TestFindTarget: names first, then the class name, then the fused parts.
func TestFindTarget(t *testing.T) {
	fused := map[string][]string{"gate_up_proj": {"gate_proj", "up_proj"}}
	targets := []string{"Linear", `re:.*\.mlp\.gate_proj$`, `re:.*\.mlp\.up_proj$`}
	if got, _ := FindTarget("m.mlp.gate_up_proj", "MergedColumnParallelLinear", targets, fused); got != "Linear" {
		t.Errorf("a fused layer named by its parts only falls to the class target; got %q", got)
	}
	if got, _ := FindTarget("m.mlp.gate_proj", "ColumnParallelLinear", targets, fused); got != `re:.*\.mlp\.gate_proj$` {
		t.Errorf("a name target wins over the class target; got %q", got)
	}
	if got, ok := FindTarget("m.mlp.gate_up_proj", "X", targets[1:], fused); !ok || got != targets[1] {
		t.Errorf("fused parts: got %q %v", got, ok)
	}
	if _, ok := FindTarget("m.o_proj", "RowParallel", []string{"re:nothing"}, nil); ok {
		t.Errorf("no target should match")
	}
}

// TestPatterns: entries reach the fused and draft names of every listed module and never a
// routed expert or the FusedMoE layer over the experts.
func TestPatterns(t *testing.T) {
	dense := []string{"lm_head", "model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj",
		"model.layers.1.mlp.gate", "model.layers.1.mlp.shared_experts.gate_proj", "model.layers.1.mlp.shared_experts.up_proj",
		"model.layers.1.self_attn.q_a_proj", "model.layers.1.self_attn.kv_a_proj_with_mqa", "model.layers.2.self_attn.q_proj"}
	int4 := []string{"model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.mlp.experts.0.up_proj", "model.layers.1.mlp.experts.0.down_proj"}
	pats := Patterns(dense, int4)
	reach := []string{"model.layers.0.mlp.gate_up_proj", "model.layers.7.mlp.shared_experts.gate_up_proj",
		"model.decoder.mlp.shared_experts.gate_up_proj", "model.layers.9.mtp_block.self_attn.fused_qkv_a_proj",
		"model.layers.1.self_attn.fused_qkv_a_proj_with_mqa", "model.layers.2.self_attn.q_proj", "lm_head"}
	for _, n := range reach {
		if !ignoreMatch(n, pats) {
			t.Errorf("%s not reached by %q", n, pats)
		}
	}
	for _, n := range append(int4, "model.layers.1.mlp.experts", "model.decoder.mlp.experts", "model.layers.2.self_attn.qkv_proj") {
		if ignoreMatch(n, pats) {
			t.Errorf("%s reached by %q", n, pats)
		}
	}
	// a pattern that would reach a quantized module falls back to the full name
	pats = Patterns([]string{"model.layers.0.self_attn.o_proj"}, []string{"model.layers.1.self_attn.o_proj"})
	if len(pats) != 1 || ignoreMatch("model.layers.1.self_attn.o_proj", pats) || !ignoreMatch("model.layers.0.self_attn.o_proj", pats) {
		t.Errorf("fallback: %q", pats)
	}
}
