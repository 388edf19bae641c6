package convert_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/convert"
)

// TestOtherPlanSaysWhatDiffers: a resume refused because the directory was started with other
// options names the option and both values; a part of another plan does too.
func TestOtherPlanSaysWhatDiffers(t *testing.T) {
	src := glm4Source(t)
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{GroupSize: 64, MaxShardSize: 1 << 20}, convert.RunOptions{})
	_, err := runPlan(plan(t, src, convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}), out, convert.RunOptions{Existing: convert.Resume})
	if !errors.Is(err, convert.ErrOtherPlan) || !strings.Contains(err.Error(), "option group size was 64, is 32") {
		t.Fatalf("resume with another group size: %v", err)
	}
	if strings.Contains(err.Error(), "max shard size") || strings.Contains(err.Error(), "source shards") {
		t.Fatalf("names options that did not change: %v", err)
	}
	split := filepath.Join(t.TempDir(), "split")
	if _, err := runPlan(plan(t, src, convert.Options{MaxShardSize: 1 << 20}), split, convert.RunOptions{Part: convert.Part{Index: 0, Count: 2}}); err != nil {
		t.Fatal(err)
	}
	_, err = runPlan(plan(t, src, convert.Options{MaxShardSize: 1 << 20, Method: "rtn"}), split, convert.RunOptions{Part: convert.Part{Index: 1, Count: 2}})
	if !errors.Is(err, convert.ErrOtherPlan) || !strings.Contains(err.Error(), `option method was "mse", is "rtn"`) {
		t.Fatalf("part with another method: %v", err)
	}
}
