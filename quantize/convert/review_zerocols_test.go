package convert_test

import (
	"errors"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
)

// TestReviewZeroInFeatures: a target with no in features ([N, 0], a valid safetensors tensor)
// cannot be INT4: the plan refuses it naming the tensor (no panic with per-channel groups, no
// late failure in the middle of the run), and --on-unsupported skip keeps it dense.
func TestReviewZeroInFeatures(t *testing.T) {
	const gate = "model.layers.1.mlp.experts.0.gate_proj.weight"
	src := writeCheckpoint(t, []raw{
		bf16Tensor(gate, 1, 64, 0),
		bf16Tensor("model.layers.1.self_attn.q_proj.weight", 2, 64, 128),
	}, map[string]any{"model_type": "glm4_moe"})
	for _, g := range []int{32, convert.PerChannel} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("group %d: plan panicked: %v", g, r)
				}
			}()
			_, err := tryPlan(t, src, convert.Options{GroupSize: g})
			if !errors.Is(err, convert.ErrUnsupported) {
				t.Errorf("group %d: got %v, want ErrUnsupported", g, err)
			}
			p, err := tryPlan(t, src, convert.Options{GroupSize: g, OnUnsupported: "skip"})
			if err != nil {
				t.Fatalf("group %d, skip: %v", g, err)
			}
			if _, err := runPlan(p, filepath.Join(t.TempDir(), "out"), convert.RunOptions{Workers: 2}); err != nil {
				t.Errorf("group %d, skip: run: %v", g, err)
			}
		}()
	}
}
