package convert_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

// ctFP8Tensor returns a compressed-tensors FP8 weight [n, k] with its per-channel weight_scale
// [n, 1] (the GLM-4.x-FP8 layout).
func ctFP8Tensor(module string, seed uint64, n, k int64) []raw {
	b := make([]byte, n*k)
	for i, v := range weights(seed, int(n*k)) {
		b[i] = safetensors.Float32ToF8E4M3(v * 448 / 0.1)
	}
	s := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(s[4*i:], math.Float32bits(0.1/448))
	}
	return []raw{{module + ".weight", safetensors.F8E4M3, []int64{n, k}, b}, {module + ".weight_scale", safetensors.F32, []int64{n, 1}, s}}
}

// TestReviewVerifyCTFP8Prefill: the prefill output of a compressed-tensors FP8 source is the
// source unchanged (its config says compressed-tensors too); verify checks it as a prefill copy,
// not as a decode checkpoint, and still notices a changed byte.
func TestReviewVerifyCTFP8Prefill(t *testing.T) {
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, ctFP8Tensor("model.layers.1.self_attn.q_proj", 2, 128, 128)...)
	ts = append(ts, ctFP8Tensor("model.layers.1.mlp.experts.0.gate_proj", 3, 64, 128)...)
	src := writeCheckpoint(t, ts, map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
		"quant_method": "compressed-tensors", "format": "float-quantized"}})
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	pre := filepath.Join(out, "prefill")
	v, err := convert.Verify(context.Background(), ck, pre, 2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Output != "prefill" || !v.OK() {
		t.Fatalf("verify prefill: output %q, problems %v", v.Output, v.Problems)
	}
	// The same check must fail on a copy that differs.
	shard := filepath.Join(pre, "model.safetensors")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := convert.Verify(context.Background(), ck, pre, 2); err != nil || v.OK() {
		t.Errorf("verify of a changed prefill copy: err %v, problems %v", err, v)
	}
}
