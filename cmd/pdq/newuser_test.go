package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// genSource writes a tiny FP8 checkpoint for the command-line tests and returns its directory.
func genSource(t *testing.T, args ...string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if _, errOut, code := runMain(t, append([]string{"testdata", "gen", "--out", src}, args...)...); code != 0 {
		t.Fatal(errOut)
	}
	return src
}

// wantRun runs args and checks the exit status and that stderr holds every string of want.
func wantRun(t *testing.T, code int, want []string, args ...string) string {
	t.Helper()
	out, errOut, got := runMain(t, args...)
	if got != code {
		t.Fatalf("%s: status %d, want %d\nstderr: %s", strings.Join(args, " "), got, code, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("%s: stderr lacks %q:\n%s", strings.Join(args, " "), w, errOut)
		}
	}
	return out
}

// TestPlanServingFlagsNeedUnitsAndGPUMemory: --gpu-memory without a unit is refused with the
// likely meaning, and a serving-plan flag without --gpu-memory is refused instead of ignored.
func TestPlanServingFlagsNeedUnitsAndGPUMemory(t *testing.T) {
	src := genSource(t, "--fp8", "--style", "glm4")
	wantRun(t, exitUsage, []string{"did you mean 141GiB"}, "plan", src, "--gpu-memory", "141")
	wantRun(t, exitUsage, []string{"--kv-cache-dtype is a serving-plan flag", "--gpu-memory"}, "plan", src, "--kv-cache-dtype", "fp8_e4m3")
	wantRun(t, 0, nil, "plan", src)
}
