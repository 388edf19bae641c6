package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewVerifyParentDir: pdq verify SRC DIR with DIR the convert output (holding prefill/
// and decode/) instead of one of its outputs is bad usage, and the message names the two paths
// that verify takes.
func TestReviewVerifyParentDir(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	for _, kind := range []string{"prefill", "decode"} {
		if err := os.MkdirAll(filepath.Join(out, kind), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, code, err := runPDQ(t, "verify", src, out)
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), filepath.Join(out, "decode")) {
		t.Errorf("verify of the parent directory: exit %d, err %v", code, err)
	}
}
