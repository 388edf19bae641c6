package main

import (
	"path/filepath"
	"testing"
)

// TestReviewConvertUsageExitCodes: contradictory or unknown convert flags are bad usage (exit
// status 2), whichever layer notices them, and nothing is written.
func TestReviewConvertUsageExitCodes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--prefill-mode", "symlink"},
		{"--resume", "--force"},
	} {
		out := filepath.Join(dir, "out")
		_, code, err := runPDQ(t, append([]string{"convert", src, "--out", out, "-q"}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}
