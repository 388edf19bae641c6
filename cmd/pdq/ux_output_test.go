package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// convertedFixture generates a tiny FP8 checkpoint and converts it; it returns the source and the
// output directory, and the stdout and stderr of the conversion.
func convertedFixture(t *testing.T, args ...string) (src, out, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	src, out = filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, errOut, code := runMain(t, "testdata", "gen", "--out", src, "--fp8", "--style", "glm4"); code != 0 {
		t.Fatal(errOut)
	}
	stdout, stderr, code := runMain(t, append([]string{"convert", src, "--out", out}, args...)...)
	if code != 0 {
		t.Fatalf("convert: %s", stderr)
	}
	return src, out, stdout, stderr
}

// routedRow finds the cells of the routed_experts int4 row of a summary table.
func routedRow(t *testing.T, what, table string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		for i := range f {
			if f[i] == "routed_experts" && i+1 < len(f) && f[i+1] == "int4" {
				return f[i+2:]
			}
		}
	}
	t.Fatalf("%s: no routed_experts int4 row in\n%s", what, table)
	return nil
}

// TestSameSQNRStatisticEverywhere: convert, verify and report print the same statistic for one
// run (the mean over tensors of per-tensor SQNR), under the same header, and verify --json and
// report --json use the same key.
func TestSameSQNRStatisticEverywhere(t *testing.T) {
	src, out, conv, _ := convertedFixture(t)
	ver, errOut, code := runMain(t, "verify", src, filepath.Join(out, "decode"))
	if code != 0 {
		t.Fatal(errOut)
	}
	rep, errOut, code := runMain(t, "report", out)
	if code != 0 {
		t.Fatal(errOut)
	}
	for name, text := range map[string]string{"convert": conv, "verify": ver, "report": rep} {
		if !strings.Contains(text, "mean SQNR dB") {
			t.Errorf("%s: no \"mean SQNR dB\" header:\n%s", name, text)
		}
	}
	// tensors, mean SQNR, min SQNR in all three; report has elements, bytes, bits/w between.
	c, v, r := routedRow(t, "convert", conv), routedRow(t, "verify", ver), routedRow(t, "report", rep)
	if c[0] != r[0] || c[1] != r[5] || v[1] != r[5] || c[2] != r[6] {
		t.Errorf("routed experts: convert %v, verify %v, report %v", c, v, r)
	}
	vj, _, _ := runMain(t, "verify", src, filepath.Join(out, "decode"), "--json")
	rj, _, _ := runMain(t, "report", out, "--json")
	for name, doc := range map[string]string{"verify": vj, "report": rj} {
		if !strings.Contains(doc, `"mean_sqnr_db": `+r[5][:2]) {
			t.Errorf("%s --json: no mean_sqnr_db near %s", name, r[5])
		}
	}
}

// TestWarningsGoToStderr: the plan's warnings are not part of the result on stdout.
func TestWarningsGoToStderr(t *testing.T) {
	src, _, conv, convErr := convertedFixture(t)
	plan, planErr, code := runMain(t, "plan", src)
	if code != 0 {
		t.Fatal(planErr)
	}
	for name, pair := range map[string][2]string{"plan": {plan, planErr}, "convert": {conv, convErr}} {
		if strings.Contains(pair[0], "warning:") || !strings.Contains(pair[1], "warning: ") {
			t.Errorf("%s: warnings on stdout or not on stderr:\nstdout %s\nstderr %s", name, pair[0], pair[1])
		}
	}
}

// TestVerifyJSON: verify --json says who checked what, with an empty problem list, not null.
func TestVerifyJSON(t *testing.T) {
	src, out, _, _ := convertedFixture(t)
	stdout, errOut, code := runMain(t, "verify", src, filepath.Join(out, "decode"), "--json")
	if code != 0 {
		t.Fatal(errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if p, ok := doc["problems"].([]any); !ok || len(p) != 0 {
		t.Errorf("problems %v, want []", doc["problems"])
	}
	if doc["tool"] != "pdq "+version || doc["source"] != src || doc["ok"] != true {
		t.Errorf("tool %v, source %v, ok %v", doc["tool"], doc["source"], doc["ok"])
	}
	if strings.Contains(stdout, `"method": ""`) || strings.Contains(stdout, `"tool": ""`) {
		t.Errorf("empty fields in:\n%s", stdout[:min(len(stdout), 600)])
	}
}

// TestReportQuietPlotAndThresholds: -q prints no table, --plot and --html say what they wrote,
// and tensors over a threshold are listed once (stdout with the table, stderr with -q).
func TestReportQuietPlotAndThresholds(t *testing.T) {
	png := filepath.Join(t.TempDir(), "sqnr.png")
	stdout, stderr, code := runMain(t, "report", reportFixture, "--fail-sqnr-below", "18.5", "--plot", png)
	if code != exitFailure {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	name := regexp.MustCompile(`model\.layers\.\d+\.mlp\.experts\.\d+\.\w+\.weight\w*`)
	listed := func(s string) int { return len(name.FindAllString(s[strings.Index(s, "FAIL"):], -1)) }
	if !strings.Contains(stdout, "FAIL") || listed(stdout) != 4 || name.MatchString(stderr) {
		t.Errorf("offenders: stdout lists %d, stderr:\n%s", listed(stdout), stderr)
	}
	if !strings.Contains(stderr, "wrote "+png+": SQNR heatmaps") {
		t.Errorf("--plot: stderr %q", stderr)
	}
	stdout, stderr, code = runMain(t, "report", reportFixture, "--fail-sqnr-below", "18.5", "-q")
	if code != exitFailure || stdout != "" || len(name.FindAllString(stderr, -1)) != 4 {
		t.Errorf("-q: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, stderr, code = runMain(t, "report", reportFixture, "-q"); code != 0 || stdout != "" || stderr != "" {
		t.Errorf("-q passing: exit %d, %q %q", code, stdout, stderr)
	}
}

// TestCalibratedSummaryReadable: a calibrated convert prints its module counts as words, not Go
// map syntax.
func TestCalibratedSummaryReadable(t *testing.T) {
	src, stats := calibFixture(t, 0)
	stdout, stderr, code := runMain(t, "convert", src, "--out", filepath.Join(t.TempDir(), "o"), "--calib", stats)
	if code != 0 {
		t.Fatal(stderr)
	}
	if strings.Contains(stdout, "map[") || !regexp.MustCompile(`modules by method: none \d+, weighted \d+`).MatchString(stdout) {
		t.Errorf("calibration line:\n%s", stdout)
	}
}

// TestRerunOfFinishedConvert: the same command again says there is nothing to do.
func TestRerunOfFinishedConvert(t *testing.T) {
	src, out, _, _ := convertedFixture(t)
	stdout, stderr, code := runMain(t, "convert", src, "--out", out)
	if code != 0 || !strings.Contains(stdout, "already complete: "+out+" (nothing to do") || strings.Contains(stdout, "worst tensors") {
		t.Errorf("rerun: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	// With report.json gone the rerun rewrites it: not "nothing to do".
	os.Remove(filepath.Join(out, "report.json"))
	stdout, _, _ = runMain(t, "convert", src, "--out", out)
	if strings.Contains(stdout, "already complete") {
		t.Errorf("rerun without report.json: %s", stdout)
	}
}

// TestVerboseLogs: -v logs the plan's decisions, the resume decision and every finished shard
// with its timing; without -v nothing of it.
func TestVerboseLogs(t *testing.T) {
	src, out, _, quiet := convertedFixture(t)
	if strings.Contains(quiet, "level=DEBUG") {
		t.Errorf("debug lines without -v:\n%s", quiet)
	}
	os.RemoveAll(out)
	_, stderr, code := runMain(t, "convert", src, "--out", out, "-v")
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, want := range []string{
		"msg=plan source=", "layout=", "msg=\"plan output\" output=decode shards=1",
		"routed_experts: int4 48", "msg=\"journal: finished shards kept", "decode=0 decode_shards=1",
		"msg=\"shard finished\" output=decode file=model-00001-of-00001.safetensors bytes=", "elapsed=",
		"msg=\"convert finished\"",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-v: no %q in\n%s", want, stderr)
		}
	}
	if n := strings.Count(stderr, "msg=\"shard finished\" output=prefill"); n != 4 {
		t.Errorf("-v: %d prefill shards logged, want 4", n)
	}
	_, stderr, _ = runMain(t, "convert", src, "--out", out, "-v")
	if !strings.Contains(stderr, "resume: the output directory holds a journal") {
		t.Errorf("-v rerun: no resume decision in\n%s", stderr)
	}
}

// TestResumeMessage: a rerun that keeps finished shards says how many, checked, before it goes on.
func TestResumeMessage(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, errOut, code := runMain(t, "testdata", "gen", "--out", src, "--fp8", "--size", "8MiB"); code != 0 {
		t.Fatal(errOut)
	}
	args := []string{"convert", src, "--out", out, "--max-shard-size", "1MiB"}
	if _, errOut, code := runMain(t, args...); code != 0 {
		t.Fatal(errOut)
	}
	shards, _ := filepath.Glob(filepath.Join(out, "decode", "*.safetensors"))
	prefill, _ := filepath.Glob(filepath.Join(out, "prefill", "*.safetensors"))
	if len(shards) < 3 {
		t.Fatalf("%d decode shards; the test wants several", len(shards))
	}
	// As after a crash: one shard lost, one changed, and no report yet.
	os.Remove(shards[0])
	if err := os.WriteFile(shards[1], []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, "report.json"))
	stdout, stderr, code := runMain(t, args...)
	want := "resuming: " + itoa(len(shards)-2) + " of " + itoa(len(shards)) + " decode shards and " +
		itoa(len(prefill)) + " of " + itoa(len(prefill)) + " prefill shards already done (verified)\n"
	if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stdout, "wrote ") {
		t.Errorf("exit %d; want %q in stderr:\n%s\nstdout:\n%s", code, want, stderr, stdout)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
