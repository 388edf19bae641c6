package main

import (
	"fmt"
	"path/filepath"
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

// TestGenQuantizedExperts: gen writes a Kimi-K2.6-style source that the engines load and convert
// reads, its INT4 experts passing through; formats gen does not write and --fp8 beside them are usage errors.
func TestGenQuantizedExperts(t *testing.T) {
	wantRun(t, exitUsage, []string{"--quantized-experts \"int8\"", "int4, nvfp4, mxfp4"}, "testdata", "gen", "--out", filepath.Join(t.TempDir(), "a"), "--quantized-experts", "int8")
	wantRun(t, exitUsage, []string{"drop --fp8"}, "testdata", "gen", "--out", filepath.Join(t.TempDir(), "b"), "--quantized-experts", "int4", "--fp8")
	src := genSource(t, "--quantized-experts", "int4")
	wantRun(t, 0, nil, "verify", "--engine", "all", src) // the source itself loads: its ignore list reaches the fused dense MLP
	// The plan says the experts pass through (no method applies), and that another group size
	// re-quantizes them.
	if out := wantRun(t, 0, nil, "plan", src); !strings.Contains(out, "INT4 g32 experts passed through from the source") {
		t.Errorf("plan of a g32 INT4 source does not say its experts pass through:\n%s", out)
	}
	if out := wantRun(t, 0, nil, "plan", src, "--group-size", "128"); strings.Contains(out, "passed through") || !strings.Contains(out, "INT4 g128 mse experts, rest") {
		t.Errorf("plan --group-size 128 of a g32 source:\n%s", out)
	}
	out := wantRun(t, 0, nil, "convert", src, "--out", filepath.Join(t.TempDir(), "out"))
	if !strings.Contains(out, "passed") {
		t.Errorf("convert summary has no passed row:\n%s", out)
	}
	// NVFP4 experts pass through too, and load: gate and up share their global scale.
	nv := genSource(t, "--quantized-experts", "nvfp4")
	dir := filepath.Join(t.TempDir(), "nv")
	if out := wantRun(t, 0, nil, "convert", nv, "--out", dir, "--decode-format", "nvfp4"); !strings.Contains(out, "passed") {
		t.Errorf("NVFP4 convert summary has no passed row:\n%s", out)
	}
	wantRun(t, 0, nil, "verify", "--engine", "all", dir)
}
