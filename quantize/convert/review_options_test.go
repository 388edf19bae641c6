package convert_test

import (
	"errors"
	"testing"

	"pdq/quantize/convert"
)

// TestReviewSignedScalesNeedMSE: signed scales exist only in the mse search; asking for them
// with rtn is refused when planning (pdq plan and convert exit 2 before writing anything), not
// by the quantizer at the first expert of the run.
func TestReviewSignedScalesNeedMSE(t *testing.T) {
	src := writeCheckpoint(t, []raw{bf16Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 1, 64, 128)}, map[string]any{"model_type": "glm4_moe"})
	if _, err := tryPlan(t, src, convert.Options{Method: "rtn", SignedScales: true}); !errors.Is(err, convert.ErrBadOptions) {
		t.Errorf("rtn with signed scales: got %v, want ErrBadOptions", err)
	}
	if _, err := tryPlan(t, src, convert.Options{Method: "mse", SignedScales: true}); err != nil {
		t.Errorf("mse with signed scales: %v", err)
	}
}
