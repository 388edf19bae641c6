package engines

import (
	"fmt"
	"testing"
)

// FuzzPatterns: whatever split of a model's modules into dense (names) and quantized (others),
// the entries reach every dense module, as named in the checkpoint, and no quantized one nor the
// FusedMoE layer over the quantized experts.
func FuzzPatterns(f *testing.F) {
	f.Add(uint64(0x5), uint64(0xff00))
	f.Add(uint64(0xffffffff), uint64(0))
	f.Add(uint64(0x123456789), uint64(0xfedcba987))
	leaves := []string{"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "mlp.gate", "self_attn.q_a_proj",
		"self_attn.kv_a_proj_with_mqa", "self_attn.q_b_proj", "self_attn.o_proj", "self_attn.q_proj",
		"self_attn.k_proj", "self_attn.v_proj", "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj",
		"mlp.shared_experts.down_proj", "eh_proj", "self_attn.indexer.weights_proj"}
	f.Fuzz(func(t *testing.T, pick, layersMask uint64) {
		var names, others []string
		for l := 0; l < 4; l++ {
			for i, leaf := range leaves {
				n := fmt.Sprintf("model.layers.%d.%s", l, leaf)
				if (pick>>(uint(i+l*16)%64))&1 == 1 {
					names = append(names, n)
				}
			}
			if (layersMask>>uint(l))&1 == 1 {
				for e := 0; e < 2; e++ {
					for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
						others = append(others, fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s", l, e, p))
					}
				}
			} else {
				for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
					names = append(names, fmt.Sprintf("model.layers.%d.mlp.experts.0.%s", l, p))
				}
			}
		}
		names = append(names, "lm_head")
		pats := Patterns(names, others)
		for _, n := range names {
			if !ignoreMatch(n, pats) {
				t.Fatalf("%s not reached by %q", n, pats)
			}
		}
		for _, o := range others {
			if ignoreMatch(o, pats) {
				t.Fatalf("quantized %s reached by %q", o, pats)
			}
			if sm := reExpert.FindStringSubmatch(o); sm != nil && ignoreMatch(sm[1], pats) {
				t.Fatalf("FusedMoE %s reached by %q", sm[1], pats)
			}
		}
	})
}
