package convert_test

import (
	"context"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

// TestReviewPerChannelAnyWidth: --group-size 0 (one INT4 scale per output channel) converts
// experts whose in features are not 32, 64 or 128 (every real model: K = 2048, 7168, ...), and
// verify accepts what it wrote.
func TestReviewPerChannelAnyWidth(t *testing.T) {
	const e = "model.layers.1.mlp.experts.0."
	src := writeCheckpoint(t, []raw{
		bf16Tensor("model.embed_tokens.weight", 1, 16, 136),
		bf16Tensor(e+"gate_proj.weight", 2, 64, 136),
		bf16Tensor(e+"up_proj.weight", 3, 64, 136),
		bf16Tensor(e+"down_proj.weight", 4, 136, 64),
	}, map[string]any{"model_type": "glm4_moe"})
	out := filepath.Join(t.TempDir(), "out")
	o := convert.Options{GroupSize: convert.PerChannel, Only: "decode"}
	if _, err := runPlan(plan(t, src, o), out, convert.RunOptions{Workers: 2}); err != nil {
		t.Fatalf("per-channel conversion: %v", err)
	}
	dec := readTensors(t, filepath.Join(out, "decode"))
	if s := dec[e+"gate_proj.weight_scale"]; s == nil || !sameShape(s.Shape, []int64{64, 1}) {
		t.Errorf("gate_proj.weight_scale: %+v, want shape [64 1]", s)
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := convert.Verify(context.Background(), ck, filepath.Join(out, "decode"), 2)
	if err != nil || !v.OK() {
		t.Errorf("verify: %v %v", err, v)
	}
}
