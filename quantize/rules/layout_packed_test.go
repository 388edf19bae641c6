package rules

import (
	"testing"

	"pdq/safetensors"
)

// TestDetectPacked: already-quantized layouts are told apart by the packed tensor's dtype and
// its companions; FP4 wins over INT4 in a mixed checkpoint, and none of them is an FP8 source.
func TestDetectPacked(t *testing.T) {
	tensor := func(name string, dt safetensors.DType, shape ...int64) *safetensors.Tensor {
		return &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: dt, Shape: shape}}
	}
	const m = "model.layers.1.mlp.experts.0.up_proj"
	dense := tensor("model.layers.1.self_attn.o_proj.weight", safetensors.BF16, 8, 8)
	int4 := tensor(m+".weight_packed", safetensors.I32, 8, 2)
	fp4 := tensor(m+".weight_packed", safetensors.U8, 8, 8)
	for _, tc := range []struct {
		name string
		ts   []*safetensors.Tensor
		want SourceLayout
	}{
		{"int4", []*safetensors.Tensor{dense, int4}, LayoutCTInt4},
		{"nvfp4", []*safetensors.Tensor{dense, fp4, tensor(m+".weight_global_scale", safetensors.F32, 1)}, LayoutCTNVFP4},
		{"mxfp4", []*safetensors.Tensor{dense, fp4}, LayoutCTMXFP4},
		{"modelopt", []*safetensors.Tensor{dense, tensor(m+".weight", safetensors.U8, 8, 8), tensor(m+".weight_scale_2", safetensors.F32)}, LayoutModelOptNVFP4},
		{"int4 then mxfp4", []*safetensors.Tensor{int4, tensor("model.layers.2.mlp.experts.0.up_proj.weight_packed", safetensors.U8, 8, 8)}, LayoutCTMXFP4},
		{"dense", []*safetensors.Tensor{dense}, LayoutDense},
	} {
		d := Detect(tc.ts, nil)
		if d.Layout != tc.want {
			t.Errorf("%s: layout %q, want %q", tc.name, d.Layout, tc.want)
		}
		if d.Packed() != (tc.want != LayoutDense) || d.FP8() {
			t.Errorf("%s: Packed() %v, FP8() %v", tc.name, d.Packed(), d.FP8())
		}
		if d.String() == string(d.Layout) && tc.want != LayoutDense {
			t.Errorf("%s: no name for people: %q", tc.name, d.String())
		}
	}
}
