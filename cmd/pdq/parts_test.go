package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/convert"
)

// TestSplitResolve: where the part comes from, and which source wins.
func TestSplitResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    splitOptions
		env  map[string]string
		want convert.Part
		from string
		bad  bool
	}{
		{name: "none", want: convert.Part{}},
		{name: "flag", o: splitOptions{part: "2/5"}, want: convert.Part{Index: 2, Count: 5}, from: "--part"},
		{name: "flag wins over slurm", o: splitOptions{part: "1/3"}, env: map[string]string{"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4"}, want: convert.Part{Index: 1, Count: 3}, from: "--part"},
		{name: "all ignores the environment", o: splitOptions{part: "all"}, env: map[string]string{"JOB_COMPLETION_INDEX": "3", "PDQ_PARTS": "4"}},
		{name: "slurm", env: map[string]string{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"}, want: convert.Part{Index: 3, Count: 4}, from: "SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT"},
		{name: "slurm from 1", env: map[string]string{"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"}, want: convert.Part{Index: 3, Count: 4}, from: "SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT"},
		{name: "slurm count by flag", o: splitOptions{parts: 8}, env: map[string]string{"SLURM_ARRAY_TASK_ID": "5"}, want: convert.Part{Index: 5, Count: 8}, from: "SLURM_ARRAY_TASK_ID of --parts"},
		{name: "slurm without count", env: map[string]string{"SLURM_ARRAY_TASK_ID": "5"}, bad: true},
		{name: "kubernetes", env: map[string]string{"JOB_COMPLETION_INDEX": "6", "PDQ_PARTS": "7"}, want: convert.Part{Index: 6, Count: 7}, from: "JOB_COMPLETION_INDEX of PDQ_PARTS"},
		{name: "kubernetes flag over env", o: splitOptions{parts: 9}, env: map[string]string{"JOB_COMPLETION_INDEX": "6", "PDQ_PARTS": "7"}, want: convert.Part{Index: 6, Count: 9}, from: "JOB_COMPLETION_INDEX of --parts"},
		{name: "kubernetes without count", env: map[string]string{"JOB_COMPLETION_INDEX": "0"}, bad: true},
		{name: "index past count", env: map[string]string{"JOB_COMPLETION_INDEX": "7", "PDQ_PARTS": "7"}, bad: true},
		{name: "bad count", env: map[string]string{"JOB_COMPLETION_INDEX": "1", "PDQ_PARTS": "many"}, bad: true},
		{name: "bad flag", o: splitOptions{part: "4/4"}, bad: true},
		{name: "parts without index", o: splitOptions{parts: 4}, bad: true},
		{name: "merge with part", o: splitOptions{merge: true, part: "1/2"}, bad: true},
		{name: "merge ignores the environment", o: splitOptions{merge: true}, env: map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := tc.o.resolve(func(k string) string { return tc.env[k] })
			if tc.bad {
				var ue usageError
				if !errors.As(err, &ue) {
					t.Fatalf("got %v %q, %v; want a usage error", got, from, err)
				}
				return
			}
			if err != nil || got != tc.want || from != tc.from {
				t.Fatalf("got %v from %q, %v; want %v from %q", got, from, err, tc.want, tc.from)
			}
		})
	}
}

// TestSplitCLI: plan --parts lists every output file once; parts given by Kubernetes'
// environment, then --merge, give the files of a single convert; merge before the last part
// is refused naming it.
func TestSplitCLI(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src, "--style", "glm4", "--max-shard-size", "1MiB"); code != 0 {
		t.Fatal(err)
	}
	flags := []string{"--max-shard-size", "1MiB", "--group-size", "64"}
	stdout, code, err := runPDQ(t, append([]string{"plan", src, "--json", "--parts", "3"}, flags...)...)
	if code != 0 {
		t.Fatal(err)
	}
	var plan planSummary
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, p := range plan.Parts {
		files += len(p.Files)
	}
	if len(plan.Parts) != 3 || files != plan.PrefillShards+plan.DecodeShards {
		t.Fatalf("plan --parts 3: %d parts, %d files; want 3 parts and the %d+%d shards", len(plan.Parts), files, plan.PrefillShards, plan.DecodeShards)
	}
	single, split := filepath.Join(dir, "single"), filepath.Join(dir, "split")
	if _, code, err := runPDQ(t, append([]string{"convert", src, "--out", single, "-q"}, flags...)...); code != 0 {
		t.Fatal(err)
	}
	defer func(g func(string) string) { getenv = g }(getenv)
	for _, i := range []string{"2", "0"} {
		getenv = func(k string) string { return map[string]string{"JOB_COMPLETION_INDEX": i, "PDQ_PARTS": "3"}[k] }
		stdout, code, err := runPDQ(t, append([]string{"convert", src, "--out", split}, flags...)...)
		if code != 0 || !strings.Contains(stdout, "part "+i+"/3 (from JOB_COMPLETION_INDEX of PDQ_PARTS) done") {
			t.Fatalf("part %s: exit %d, %v\n%s", i, code, err, stdout)
		}
	}
	getenv = func(string) string { return "" }
	_, code, err = runPDQ(t, append([]string{"convert", src, "--out", split, "--merge", "-q"}, flags...)...)
	if code != exitFailure || err == nil || !strings.Contains(err.Error(), "part 1/3 has not started") {
		t.Fatalf("merge before part 1: exit %d, %v", code, err)
	}
	if _, code, err := runPDQ(t, append([]string{"convert", src, "--out", split, "--part", "1/3", "-q"}, flags...)...); code != 0 {
		t.Fatal(err)
	}
	if _, code, err := runPDQ(t, append([]string{"convert", src, "--out", split, "--merge", "-q"}, flags...)...); code != 0 {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(single, "report.json"))
	if b, err := os.ReadFile(filepath.Join(split, "report.json")); err != nil || !bytes.Equal(a, b) {
		t.Errorf("report.json of the merge differs from a single run's (%v)", err)
	}
	for _, kind := range []string{"prefill", "decode"} {
		ents, _ := os.ReadDir(filepath.Join(single, kind))
		for _, e := range ents {
			a, _ := os.ReadFile(filepath.Join(single, kind, e.Name()))
			b, err := os.ReadFile(filepath.Join(split, kind, e.Name()))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s: split and merged differs from a single run (%v)", kind, e.Name(), err)
			}
		}
	}
	if stdout, code, err := runPDQ(t, "verify", src, filepath.Join(split, "decode")); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify of the merged decode: exit %d, %v", code, err)
	}
}
