package convert_test

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

// TestReviewInputScaleDropped: a compressed-tensors FP8 source may carry static activation
// scales (M.input_scale, FORMATS.md §2). The decode checkpoint turns those modules into INT4 or
// BF16 with no activation quantization, so an input_scale left beside them is a tensor no
// engine parameter takes; the prefill copy keeps it.
func TestReviewInputScaleDropped(t *testing.T) {
	const expert, attn = "model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.self_attn.q_proj"
	inScale := func(module string) raw {
		b := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.01))
		return raw{module + ".input_scale", safetensors.F32, []int64{1}, b}
	}
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, ctFP8Tensor(attn, 2, 128, 128)...)
	ts = append(ts, inScale(attn))
	ts = append(ts, ctFP8Tensor(expert, 3, 64, 128)...)
	ts = append(ts, inScale(expert))
	src := writeCheckpoint(t, ts, map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
		"quant_method": "compressed-tensors", "format": "float-quantized"}})
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
	dec := readTensors(t, filepath.Join(out, "decode"))
	for _, m := range []string{expert, attn} {
		if dec[m+".input_scale"] != nil {
			t.Errorf("decode holds %s.input_scale beside a module without activation quantization", m)
		}
	}
	if dec[expert+".weight_packed"] == nil || dec[attn+".weight"] == nil {
		t.Errorf("decode misses the converted modules")
	}
	pre := readTensors(t, filepath.Join(out, "prefill"))
	if pre[expert+".input_scale"] == nil {
		t.Errorf("prefill copy lost %s.input_scale", expert)
	}
}
