package rules

import "testing"

// TestDetectedFP8: the FP8 sources are DeepSeek blocks and compressed-tensors FP8, and only they.
func TestDetectedFP8(t *testing.T) {
	for l, want := range map[SourceLayout]bool{
		LayoutDense: false, LayoutFP8Block: true, LayoutCTFP8: true, LayoutCTInt4: false, "": false,
	} {
		if got := (Detected{Layout: l}).FP8(); got != want {
			t.Errorf("layout %q: FP8() = %v, want %v", l, got, want)
		}
	}
}
