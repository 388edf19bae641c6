package convert_test

import (
	"path/filepath"
	"sync"
	"testing"

	"pdq/quantize/convert"
)

// TestReviewProgressReachesTotal: the progress callback ends at done == total, also for an FP8
// source whose modules read scale tensors besides their weights.
func TestReviewProgressReachesTotal(t *testing.T) {
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, fp8Tensor("model.layers.1.self_attn.q_proj.weight", 2, 200, 256, false)...)
	ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 3, 64, 128, false)...)
	src := writeCheckpoint(t, ts, fp8Config)
	var mu sync.Mutex
	var last, total int64
	ro := convert.RunOptions{Workers: 2, Progress: func(d, tot int64, _ string) {
		mu.Lock()
		defer mu.Unlock()
		last, total = max(last, d), tot
	}}
	convertTo(t, src, filepath.Join(t.TempDir(), "out"), convert.Options{}, ro)
	if last != total || total == 0 {
		t.Errorf("progress ended at %d of %d bytes", last, total)
	}
}
