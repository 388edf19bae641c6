package rules

import "testing"

func TestRoleOf(t *testing.T) {
	cases := []struct {
		name string
		want Role
	}{
		{"model.layers.3.mlp.experts.17.gate_proj.weight", RoleRoutedExpert},
		{"model.layers.3.mlp.experts.17.down_proj.weight_scale_inv", RoleRoutedExpert},
		{"model.layers.3.mlp.experts.0.up_proj.weight_packed", RoleRoutedExpert},
		{"model.layers.3.mlp.shared_experts.up_proj.weight", RoleSharedExpert},
		{"model.layers.3.mlp.gate.weight", RoleRouter},
		{"model.layers.3.mlp.gate.e_score_correction_bias", RoleRouter},
		{"model.layers.0.mlp.gate_proj.weight", RoleDenseMLP},
		{"model.layers.0.mlp.down_proj.weight_scale_inv", RoleDenseMLP},
		{"model.layers.0.self_attn.q_proj.weight", RoleAttention},
		{"model.layers.0.self_attn.q_proj.bias", RoleAttention},
		{"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", RoleAttention},
		{"model.layers.0.self_attn.q_a_layernorm.weight", RoleNorm},
		{"model.layers.0.self_attn.indexer.k_norm.bias", RoleNorm},
		{"model.layers.0.input_layernorm.weight", RoleNorm},
		{"model.norm.weight", RoleNorm},
		{"model.layers.61.enorm.weight", RoleNorm},
		{"model.embed_tokens.weight", RoleEmbedding},
		{"lm_head.weight", RoleEmbedding},
		{"model.layers.61.shared_head.head.weight", RoleEmbedding},
		{"model.layers.61.eh_proj.weight", RoleOther},
	}
	for _, c := range cases {
		if got := RoleOf(c.name); got != c.want {
			t.Errorf("RoleOf(%q) = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestModuleOf(t *testing.T) {
	cases := []struct{ name, module, suffix string }{
		{"a.b.weight", "a.b", "weight"},
		{"a.b.weight_scale_inv", "a.b", "weight_scale_inv"},
		{"a.b.weight_scale", "a.b", "weight_scale"},
		{"a.b.weight_packed", "a.b", "weight_packed"},
		{"a.b.e_score_correction_bias", "a.b.e_score_correction_bias", ""},
	}
	for _, c := range cases {
		m, s := ModuleOf(c.name)
		if m != c.module || s != c.suffix {
			t.Errorf("ModuleOf(%q) = %q, %q; want %q, %q", c.name, m, s, c.module, c.suffix)
		}
	}
}
