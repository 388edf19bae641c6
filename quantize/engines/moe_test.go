package engines_test

import (
	"encoding/json"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
)

// TestMoERules: the MoE kernels' constraints, each broken once on a layout that passes.
func TestMoERules(t *testing.T) {
	pl := layout(t, "glm-4.7.official.json", false, convert.Options{GroupSize: 128}, nil)
	checkOK(t, "glm-4.7 g128 TP4", engines.VLLM, pl.decode, 4)
	// 1536 / 8 = 192 is not a multiple of max(64, 128), nor of the FP8 block.
	if r := engines.Check(engines.VLLM, pl.decode, engines.Options{TP: 8}); !hasRule(r, "moe-shape", "experts") {
		t.Errorf("TP8 g128: %v", r.Problems)
	}
	if r := engines.Check(engines.SGLang, pl.prefill, engines.Options{TP: 8}); !hasRule(r, "fp8-moe-shape", "experts") {
		t.Errorf("TP8 FP8 prefill: %v", r.Problems)
	}
	edit := func(f func(w map[string]any)) engines.Input {
		in := pl.decode
		qc := qconfig(t, &in)
		g := qc["config_groups"].(map[string]any)["group_0"].(map[string]any)
		f(g["weights"].(map[string]any))
		return in
	}
	in := edit(func(w map[string]any) { w["symmetric"] = false })
	if r := engines.Check(engines.SGLang, in, engines.Options{TP: 4}); !hasRule(r, "moe-symmetric", "") {
		t.Errorf("asymmetric: %v", r.Problems)
	}
	in = edit(func(w map[string]any) { w["group_size"] = json.Number("256") })
	if r := engines.Check(engines.VLLM, in, engines.Options{TP: 4}); !hasRule(r, "moe-group-size", "") {
		t.Errorf("group 256: %v", r.Problems)
	}
	// an ignore entry that reaches the routed experts
	in = withIgnore(t, pl.decode, []string{`re:.*mlp.*`, `re:.*self_attn.*`, "lm_head"})
	if r := engines.Check(engines.VLLM, in, engines.Options{TP: 4}); !hasRule(r, "ignored-not-plain", "mlp.experts") {
		t.Errorf("ignored experts: %v", r.Problems)
	}
	// a missing projection of one expert
	var ts []engines.Tensor
	for _, x := range pl.decode.Tensors {
		if x.Name != "model.layers.3.mlp.experts.5.down_proj.weight_packed" {
			ts = append(ts, x)
		}
	}
	in = pl.decode
	in.Tensors = ts
	if r := engines.Check(engines.SGLang, in, engines.Options{TP: 4}); !hasRule(r, "moe-experts", "") {
		t.Errorf("missing expert projection: %v", r.Problems)
	}
}
