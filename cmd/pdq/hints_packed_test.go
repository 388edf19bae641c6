package main

import (
	"fmt"
	"strings"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
)

// TestHintsQuantizedSource: the hints for sources already quantized say what pdq reads and what
// to do, and never send the user to a flag that leads back to the same refusal.
func TestHintsQuantizedSource(t *testing.T) {
	unread := hintFor(fmt.Errorf("convert: %w: quant_method \"gptq\"", convert.ErrQuantizedSource))
	for _, want := range []string{"pack-quantized INT4", "nvfp4", "mxfp4", "ModelOpt NVFP4", "BF16", "FP8", "pdq inspect"} {
		if !strings.Contains(unread, want) {
			t.Errorf("ErrQuantizedSource's hint does not name %q: %q", want, unread)
		}
	}
	// A malformed packed module also wraps the decoder's sentinel; its own hint comes first.
	bad := hintFor(fmt.Errorf("convert: x: %w: %w", convert.ErrPackedSource, quantize.ErrBadScale))
	if !strings.Contains(bad, "fetch it again") || strings.Contains(bad, "FP8 source") {
		t.Errorf("ErrPackedSource's hint: %q", bad)
	}
	for _, h := range []string{unread, bad} {
		if strings.Contains(h, "--on-unsupported") || strings.Contains(h, "requantize") {
			t.Errorf("hint leads back to the refusal: %q", h)
		}
	}
}
