package convert_test

import (
	"testing"

	"pdq/quantize/convert"
)

// TestCompressedTensorsVersion: a decode config declares the compressed-tensors version its
// groups need. scale_dtype and zp_dtype (FP4 groups, W4AFP8's) and the mxfp4-pack-quantized
// format came with 0.13.0; 0.12.2's QuantizationArgs forbids unknown fields, so those configs
// declare 0.13.0, and INT4's, which carry neither, keep 0.12.2.
func TestCompressedTensorsVersion(t *testing.T) {
	cases := []struct {
		src  func(testing.TB) string
		o    convert.Options
		want string
	}{
		{deepseekSource, convert.Options{}, "0.12.2"},
		{deepseekSource, convert.Options{GroupSize: 128}, "0.12.2"},
		{kimiSource, convert.Options{}, "0.12.2"}, // INT4 passed through
		{deepseekSource, convert.Options{DecodeFormat: convert.DecodeNVFP4}, "0.13.0"},
		{deepseekSource, convert.Options{DecodeFormat: convert.DecodeMXFP4}, "0.13.0"},
		{deepseek256Source, convert.Options{DecodeFormat: convert.DecodeW4AFP8}, "0.13.0"},
		{func(t testing.TB) string { return fp4Source(t, "nvfp4") }, convert.Options{DecodeFormat: convert.DecodeNVFP4}, "0.13.0"}, // passed through
	}
	for _, c := range cases {
		p := plan(t, c.src(t), c.o)
		var qc map[string]any
		for _, out := range p.Outputs {
			if out.Kind == convert.KindDecode {
				qc, _ = out.Config["quantization_config"].(map[string]any)
			}
		}
		if qc == nil {
			t.Fatalf("%+v: no decode quantization_config", c.o)
		}
		carries := false
		for _, g := range qc["config_groups"].(map[string]any) {
			for _, args := range []string{"weights", "input_activations"} {
				a, _ := g.(map[string]any)[args].(map[string]any)
				if _, ok := a["scale_dtype"]; ok {
					carries = true
				}
			}
		}
		if got := qc["version"]; got != c.want || carries != (c.want != "0.12.2") {
			t.Errorf("%+v: version %v with scale_dtype carried %v, want %s", c.o, got, carries, c.want)
		}
	}
}
