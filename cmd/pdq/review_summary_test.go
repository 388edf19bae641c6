package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewSummaryNamesWhatWasWritten: with --only, the summary of pdq convert names only the
// output it wrote.
func TestReviewSummaryNamesWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	for _, only := range []string{"decode", "prefill"} {
		out := filepath.Join(dir, "out-"+only)
		stdout, code, err := runPDQ(t, "convert", src, "--out", out, "--only", only)
		if code != 0 {
			t.Fatal(err)
		}
		other := "prefill"
		if only == "prefill" {
			other = "decode"
		}
		if strings.Contains(stdout, filepath.Join(out, other)) || !strings.Contains(stdout, filepath.Join(out, only)) {
			t.Errorf("--only %s: summary says\n%s", only, stdout)
		}
	}
}
