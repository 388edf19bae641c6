package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewPlanPerChannelText: pdq plan --group-size 0 describes the decode scheme as per
// channel, not as a group of 0.
func TestReviewPlanPerChannelText(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	stdout, code, err := runPDQ(t, "plan", src, "--group-size", "0")
	if code != 0 {
		t.Fatal(err)
	}
	if strings.Contains(stdout, "INT4 g0") || !strings.Contains(stdout, "INT4 per-channel") {
		t.Errorf("plan --group-size 0 says:\n%s", stdout)
	}
}
