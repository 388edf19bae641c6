package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"pdq/quantize/convert"
)

// TestHints: every sentinel with a hint gets it through wrapping, and every flag a hint names
// exists on pdq convert (a renamed flag fails here, not in front of a user).
func TestHints(t *testing.T) {
	cmd := newConvertCmd()
	fh := formatHints()
	if len(fh) == 0 {
		t.Error("no decode format's refusal has a hint")
	}
	for _, h := range append(fh, hints...) {
		if got := hintFor(fmt.Errorf("convert: x: %w", h.err)); got != h.hint {
			t.Errorf("%v: hint %q", h.err, got)
		}
		for _, flag := range regexp.MustCompile(`--[a-z][a-z0-9-]*`).FindAllString(h.hint, -1) {
			if cmd.Flags().Lookup(strings.TrimPrefix(flag, "--")) == nil {
				t.Errorf("hint for %v names %s, which pdq convert does not have", h.err, flag)
			}
		}
	}
	if hintFor(fmt.Errorf("other")) != "" {
		t.Error("a hint for an unrelated error")
	}
	// A non-empty DIR without a journal has nothing to resume: the hint must not send the user to
	// --resume (which is refused there), but to another --out or --force.
	if h := hintFor(fmt.Errorf("x: %w", convert.ErrNotEmpty)); strings.Contains(h, "use --resume") || !strings.Contains(h, "--force") || !strings.Contains(h, "--out") {
		t.Errorf("ErrNotEmpty's hint: %q", h)
	}
}
