package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestHintsLeadSomewhere: an INT4 source converts (its experts pass through); the hint for a
// quantization pdq does not read names what it reads instead of pointing at a flag that gives
// the same error; verify with its arguments swapped says their order; and --method gptq points
// at --calib-method gptq.
func TestHintsLeadSomewhere(t *testing.T) {
	src := genSource(t, "--fp8", "--style", "glm4")
	out := filepath.Join(t.TempDir(), "out")
	wantRun(t, 0, nil, "convert", src, "--out", out, "-q")
	dec := filepath.Join(out, "decode")
	wantRun(t, 0, nil, "convert", dec, "--out", filepath.Join(t.TempDir(), "again"), "-q")
	awq := genSource(t, "--style", "glm4")
	cfg, err := os.ReadFile(filepath.Join(awq, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "{", `{"quantization_config": {"quant_method": "awq", "bits": 4},`, 1))
	if err := os.WriteFile(filepath.Join(awq, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--on-unsupported", "skip"}} {
		_, errOut, code := runMain(t, append([]string{"convert", awq, "--out", filepath.Join(t.TempDir(), "x")}, extra...)...)
		if code == 0 || !strings.Contains(errOut, "pack-quantized INT4") || strings.Contains(errOut, "hint: use --on-unsupported") {
			t.Errorf("convert of an AWQ source %v: status %d\n%s", extra, code, errOut)
		}
	}
	wantRun(t, exitFailure, []string{"hint: the arguments are SRC", "pdq verify SRC DIR/decode"}, "verify", dec, src)
	wantRun(t, exitUsage, []string{"--calib-method gptq"}, "convert", src, "--out", filepath.Join(t.TempDir(), "y"), "--method", "gptq")
}

// TestReportHTMLMessages: the page's message counts the rows the page holds, not the selection;
// an --html path that cannot be written is refused before the table is printed, naming the flag
// and not a temporary file.
func TestReportHTMLMessages(t *testing.T) {
	_, out, _, _ := convertedFixture(t)
	page := filepath.Join(t.TempDir(), "r.html")
	_, errOut, code := runMain(t, "report", out, "--html", page, "--top", "5")
	if code != 0 || !strings.Contains(errOut, "table of the 5 of ") || !strings.Contains(errOut, "--top 0 for all") {
		t.Fatalf("status %d: %s", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "missing", "r.html")
	stdout, errOut, code := runMain(t, "report", out, "--html", bad)
	if code == 0 || stdout != "" || !strings.Contains(errOut, "--html "+bad) || strings.Contains(errOut, ".tmp") {
		t.Fatalf("unwritable --html: status %d, stdout %d bytes, stderr %s", code, len(stdout), errOut)
	}
}

// TestConvertChecksFreeSpace: a conversion that cannot fit is refused before any work, saying
// what it writes and what is free; an out-of-space error during the run says the same.
func TestConvertChecksFreeSpace(t *testing.T) {
	src := genSource(t, "--style", "glm4")
	defer func(f func(string) (int64, error)) { freeBytes = f }(freeBytes)
	freeBytes = func(string) (int64, error) { return 1000, nil }
	out := filepath.Join(t.TempDir(), "out")
	wantRun(t, exitFailure, []string{"not enough free space: the conversion writes", "1000 B free", "hint: free some space"}, "convert", src, "--out", out)
	if _, err := os.Stat(filepath.Join(out, "decode")); err == nil {
		t.Error("a refused conversion wrote decode/")
	}
	err := withSpace(&os.PathError{Op: "preallocate", Path: "x", Err: syscall.ENOSPC}, 5<<30, out)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "the conversion writes 5.00 GiB; 1000 B free now") {
		t.Fatalf("out of space: %v", err)
	}
}

// TestGenAndHeaderOnlyMessages: gen --size below the smallest model says what it wrote instead;
// converting a header-only FP8 checkpoint (zero scales) gets a hint naming that cause.
func TestGenAndHeaderOnlyMessages(t *testing.T) {
	dir := t.TempDir()
	wantRun(t, 0, []string{"note: --size 1.00 KiB is below the smallest"}, "testdata", "gen", "--out", filepath.Join(dir, "small"), "--size", "1KiB")
	src := filepath.Join(dir, "ho")
	wantRun(t, 0, nil, "testdata", "gen", "--out", src, "--fp8", "--header-only")
	wantRun(t, exitFailure, []string{"bad scale", "hint: ", "header-only checkpoint"}, "convert", src, "--out", filepath.Join(dir, "o"))
}

// TestDemoModelHasNoParallelWarnings: the demo's checkpoint (the Makefile's gen line) splits
// across 8 GPUs, so the demo prints no tensor-parallel warnings about its own toy model.
func TestDemoModelHasNoParallelWarnings(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the demo's 50 MiB checkpoint")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(mk), "\n") {
		if i := strings.Index(line, "pdq testdata gen "); i >= 0 && strings.Contains(line, "$(DEMO)/src") {
			args = strings.Fields(line[i+len("pdq "):])
		}
	}
	if args == nil {
		t.Fatal("no gen line in the Makefile's demo")
	}
	src := filepath.Join(t.TempDir(), "src")
	for i, a := range args {
		if a == "$(DEMO)/src" {
			args[i] = src
		}
	}
	wantRun(t, 0, nil, args...)
	_, errOut, code := runMain(t, "plan", src)
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Fatalf("plan of the demo model: status %d\n%s", code, errOut)
	}
}

// TestNestedOutputRefused: an --out inside another conversion's output is refused with or
// without --resume or --force, with a hint to go beside it; a non-empty directory without a
// journal is not sent to --resume, and --resume there is refused.
func TestNestedOutputRefused(t *testing.T) {
	src := genSource(t, "--fp8", "--style", "glm4")
	out := filepath.Join(t.TempDir(), "A")
	wantRun(t, 0, nil, "convert", src, "--out", out, "-q")
	for _, extra := range [][]string{nil, {"--resume"}, {"--force"}} {
		wantRun(t, exitFailure, []string{"inside another conversion's output", "hint: choose an --out beside"},
			append([]string{"convert", src, "--out", filepath.Join(out, "decode")}, extra...)...)
	}
	junk := t.TempDir()
	if err := os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runMain(t, "convert", src, "--out", junk)
	if code == 0 || strings.Contains(errOut, "use --resume") {
		t.Fatalf("non-empty directory: status %d\n%s", code, errOut)
	}
	wantRun(t, exitFailure, []string{"no conversion to resume"}, "convert", src, "--out", junk, "--resume")
}

// TestPartCountBounded: a part count near 2^63, from the flags or the batch system's
// environment, is refused as a usage error naming the most parts there can be.
func TestPartCountBounded(t *testing.T) {
	src := genSource(t, "--fp8", "--style", "glm4")
	const huge = "9223372036854775807"
	wantRun(t, exitUsage, []string{"at most"}, "plan", src, "--parts", huge)
	wantRun(t, exitUsage, []string{"at most"}, "convert", src, "--out", filepath.Join(t.TempDir(), "o"), "--part", "0/"+huge)
	t.Setenv("SLURM_ARRAY_TASK_ID", "0")
	t.Setenv("SLURM_ARRAY_TASK_COUNT", huge)
	wantRun(t, exitUsage, []string{"at most"}, "convert", src, "--out", filepath.Join(t.TempDir(), "o"))
}
