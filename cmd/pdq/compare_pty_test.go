//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareTerminal: on a terminal pdq compare draws the common progress bar on one line that
// fits 80 columns, ends it at 100%, then prints the table; with --json it draws none.
func TestCompareTerminal(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, errOut, code := runMain(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(errOut)
	}
	s := startPTY(t, 80, "compare", src, "--workers", "1")
	code, raw := s.wait(t)
	scr := newScreen(80, raw)
	lines := scr.text()
	if code != 0 || scr.barWraps("compare ") != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], "compare ") ||
		!strings.Contains(lines[0], " 100% [") || !strings.HasPrefix(lines[1], "48 of 48 target modules measured") {
		t.Errorf("exit %d, %d wrapped; screen:\n%s", code, scr.barWraps("compare "), strings.Join(lines, "\n"))
	}
	s = startPTY(t, 80, "compare", src, "--json")
	code, raw = s.wait(t)
	if code != 0 || strings.Contains(raw, "100% [") || !strings.HasPrefix(strings.TrimSpace(raw), "{") {
		t.Errorf("--json on a terminal: exit %d, drew\n%s", code, raw)
	}
}
