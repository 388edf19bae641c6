package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runMain runs the command line as main does and returns stdout, stderr and the exit status.
func runMain(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	code := execute(context.Background(), root, &errOut)
	return out.String(), errOut.String(), code
}

// TestErrorsSpeakOfCommands: failures are one line naming the command the user ran and the file
// concerned, never pdq's internal packages, and argument errors say which arguments are missing.
func TestErrorsSpeakOfCommands(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		code     int
		want     []string
		wantNone []string
	}{
		{[]string{"inspect"}, exitUsage, []string{"pdq inspect: want 1 argument (SRC), got none", "Usage: pdq inspect SRC"}, []string{"pdq: pdq", "argument(s)"}},
		{[]string{"publish", "x"}, exitUsage, []string{"pdq publish: want 2 arguments (DIR URL), got 1"}, nil},
		{[]string{"testdata", "gen", "x"}, exitUsage, []string{"pdq testdata gen: takes no arguments"}, nil},
		{[]string{"report", filepath.Join(dir, "nope.json")}, exitFailure, []string{"pdq report: " + filepath.Join(dir, "nope.json") + ": no such file"}, []string{"reportview"}},
		{[]string{"report", "../../go.mod"}, exitFailure, []string{"pdq report: ../../go.mod: not a pdq report"}, []string{"reportview"}},
		{[]string{"convert", "x"}, exitUsage, []string{"pdq convert: --out DIR is required"}, []string{"convert: convert"}},
		{[]string{"pull", "file://" + filepath.Join(dir, "empty"), filepath.Join(dir, "dst")}, exitFailure, []string{"pdq pull: "}, []string{"publish:"}},
	} {
		_, stderr, code := runMain(t, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: want %q in stderr:\n%s", tc.args, w, stderr)
			}
		}
		for _, w := range tc.wantNone {
			if strings.Contains(stderr, w) {
				t.Errorf("%v: %q in stderr:\n%s", tc.args, w, stderr)
			}
		}
	}
}

// TestMisspelledFlagSuggestion: a misspelled flag gets "did you mean", like a misspelled command.
func TestMisspelledFlagSuggestion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for no suggestion
	}{
		{[]string{"convert", "x", "--otu", "y"}, "--out"},
		{[]string{"convert", "x", "--grup-size", "64"}, "--group-size"},
		{[]string{"report", "x", "--fail-sqnr-bellow", "18"}, "--fail-sqnr-below"},
		{[]string{"plan", "x", "--verbos"}, "--verbose"},
		{[]string{"plan", "x", "--zzzzzzzz"}, ""},
	} {
		_, stderr, code := runMain(t, tc.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, exitUsage)
		}
		if tc.want == "" {
			if strings.Contains(stderr, "Did you mean") {
				t.Errorf("%v: suggests something:\n%s", tc.args, stderr)
			}
			continue
		}
		if !strings.Contains(stderr, "Did you mean this?\n\t"+tc.want+"\n") {
			t.Errorf("%v: want the suggestion %s in:\n%s", tc.args, tc.want, stderr)
		}
	}
}

// TestInspectSaysWhatTheFileIs: a file that is not safetensors at all is named as such, with what
// its first bytes look like, rather than an impossible header length.
func TestInspectSaysWhatTheFileIs(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ data, want string }{
		"config.json":       {`{"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168}`, `not a safetensors file: it starts with "{", like JSON text`},
		"pytorch_model.bin": {"PK\x03\x04" + strings.Repeat("\x00", 40), `not a safetensors file: it starts with "PK", a zip archive`},
		"README.md":         {"# A model card with some words in it\n", "not a safetensors file: it is text"},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runMain(t, "inspect", p)
		if code != exitFailure || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, name) {
			t.Errorf("%s: exit %d, stderr %q; want %q", name, code, stderr, tc.want)
		}
	}
}
