package convert_test

import (
	"errors"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

// TestReviewFP8ScaleShapeRefused: pdq reads FP8 scales per output channel ([N, 1] or [N]) or in
// 128x128 blocks. Any other scale shape (a per-tensor scalar, a wrong row count) is refused at
// planning with ErrUnsupported naming the scale tensor, instead of a panic or an out-of-range
// read in the middle of the run.
func TestReviewFP8ScaleShapeRefused(t *testing.T) {
	const module = "model.layers.1.mlp.experts.0.gate_proj"
	for _, shape := range [][]int64{{}, {1}, {1, 1}, {2, 1}} {
		ts := ctFP8Tensor(module, 3, 256, 256)
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		ts[1] = raw{ts[1].name, safetensors.F32, shape, make([]byte, 4*n)}
		ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 256))
		src := writeCheckpoint(t, ts, map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
			"quant_method": "compressed-tensors", "format": "float-quantized"}})
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("scale %v: panic: %v", shape, r)
				}
			}()
			_, err := tryPlan(t, src, convert.Options{})
			if !errors.Is(err, convert.ErrUnsupported) || !strings.Contains(err.Error(), module+".weight_scale") {
				t.Errorf("scale %v: got %v, want ErrUnsupported naming the scale", shape, err)
			}
			// A prefill-only run of an FP8 source copies the files and reads no scale.
			if _, err := tryPlan(t, src, convert.Options{Only: "prefill"}); err != nil {
				t.Errorf("scale %v, only prefill: %v", shape, err)
			}
		}()
	}
}
