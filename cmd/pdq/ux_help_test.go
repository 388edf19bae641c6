package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"pdq/kernels"
	"pdq/quantize/convert"
)

// TestEveryCommandHasAnExample: every command and command group a user can reach shows an
// example in --help (cobra's per-shell completion commands explain themselves in their text).
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestHelpText: defaults are shown once and as typed, examples work from the repository root,
// and out-of-range values are refused rather than ignored.
func TestHelpText(t *testing.T) {
	help := func(args ...string) string {
		out, code, err := runPDQ(t, append(args, "--help")...)
		if code != 0 {
			t.Fatalf("%v --help: %v", args, err)
		}
		return out
	}
	gen := help("testdata", "gen")
	for _, line := range strings.Split(gen, "\n") {
		if strings.Count(line, "default") > 1 {
			t.Errorf("testdata gen --help: two defaults in %q", line)
		}
	}
	// Every file an example names exists from the repository root.
	for _, m := range regexp.MustCompile(`--config (\S+\.json)`).FindAllStringSubmatch(gen, -1) {
		if _, err := os.Stat(filepath.Join("..", "..", m[1])); err != nil {
			t.Errorf("testdata gen example names %s: %v", m[1], err)
		}
	}
	for _, args := range [][]string{{"plan"}, {"convert"}, {"verify"}, {"calib", "inspect"}} {
		h := help(args...)
		if args[0] != "verify" && !strings.Contains(h, "(default "+convert.DefaultTargets+")") {
			t.Errorf("%v --help: --targets default not shown as typed:\n%s", args, h)
		}
		if strings.Contains(h, `\\.experts`) {
			t.Errorf("%v --help: doubled backslashes in the --targets default", args)
		}
	}
	// convert --help names the environment that changes how it writes and computes, and
	// --version the CPU loop set in use, so a user can tell whether a build is the fast one.
	conv := help("convert")
	for _, want := range []string{"PDQ_DIRECT_IO=0", "PDQ_DIRECT_IO=1", "PDQ_NOSIMD=1"} {
		if !strings.Contains(conv, want) {
			t.Errorf("convert --help lacks %q", want)
		}
	}
	if out, code, err := runPDQ(t, "--version"); code != 0 || !strings.Contains(out, "(CPU kernels: "+kernels.SIMD()+")") {
		t.Errorf("pdq --version: %q (%v), want the CPU kernels %s named", out, err, kernels.SIMD())
	}
	// The DP-attention flags name the engines' own flags they stand for.
	plan := help("plan")
	for _, want := range []string{"--dp int", "--enable-dp-attention --dp-size N", "--data-parallel-size N", "--dp-lm-head", "--enable-dp-lm-head", "must divide --tp"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan --help lacks %q", want)
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"testdata", "gen", "--out", filepath.Join(dir, "a"), "--experts", "0"}, "--experts 0: want at least 1"},
		{[]string{"testdata", "gen", "--out", filepath.Join(dir, "b"), "--layers", "0"}, "--layers 0: want at least 1"},
		{[]string{"testdata", "gen", "--out", filepath.Join(dir, "d"), "--vocab", "-3"}, "--vocab -3: want at least 1"},
		{[]string{"testdata", "gen", "--out", filepath.Join(dir, "c"), "--config", "glm-5.json"}, "testdata/configs"},
		{[]string{"plan", dir, "--group-size", "48"}, "--group-size 48: want 32, 64 or 128, or 0 for one scale per output channel"},
		{[]string{"plan", dir, "--group-size", "-1"}, "--group-size -1: want 32, 64 or 128, or 0 for one scale per output channel"}, // per channel is 0 on the command line
	} {
		_, code, err := runPDQ(t, tc.args...)
		if code == 0 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want %q", tc.args, code, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Errorf("--experts 0 wrote %s", filepath.Join(dir, "a"))
	}
}
