package convert_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pdq/internal/fsutil"
	"pdq/quantize/convert"
)

// runParts runs parts 0..n-1 of a conversion of src with options o concurrently into out, each
// in a process of its own (the test binary again); calib is the statistics file of o, or "".
func runParts(t *testing.T, src string, o convert.Options, calib, out string, n int) {
	t.Helper()
	opts, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = tryChild(src, out, 0, 0, envPart+"="+fmt.Sprintf("%d/%d", i, n), envOptions+"="+string(opts), envCalib+"="+calib)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("part %d/%d: %v", i, n, err)
		}
	}
}

// TestPartsMergeIdentical: a conversion split into N parts run at once, as separate processes,
// into one directory, then merged, is byte-identical to a single run, for a BF16 and an FP8
// source and with GPTQ statistics; every part writes its own files only.
func TestPartsMergeIdentical(t *testing.T) {
	bf16 := glm4Source(t)
	stats := filepath.Join(t.TempDir(), "stats.safetensors")
	writeStats(t, bf16, stats, 1, 0)
	if testing.Short() {
		t.Skip("runs conversions in child processes")
	}
	for _, tc := range []struct {
		name  string
		src   string
		o     convert.Options
		calib string
		parts []int
	}{
		{"glm4-bf16", bf16, convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}, "", []int{1, 2, 3, 7}},
		{"deepseek-fp8", deepseekSource(t), convert.Options{GroupSize: 64, MaxShardSize: 1 << 20}, "", []int{1, 2, 3, 7}},
		{"glm4-gptq", bf16, convert.Options{GroupSize: 32, MaxShardSize: 1 << 20, CalibMethod: convert.CalibGPTQ}, stats, []int{2, 3}},
	} {
		if tc.calib != "" {
			tc.o.Calib = openStats(t, tc.calib)
		}
		t.Run(tc.name, func(t *testing.T) {
			single := filepath.Join(t.TempDir(), "single")
			convertTo(t, tc.src, single, tc.o, convert.RunOptions{Workers: 2})
			want := outputFiles(t, single)
			for _, n := range tc.parts {
				p := plan(t, tc.src, tc.o)
				out := filepath.Join(t.TempDir(), "split")
				runParts(t, tc.src, tc.o, tc.calib, out, n)
				if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
					t.Fatalf("%d parts: report.json written before the merge", n)
				}
				if _, err := convert.Merge(context.Background(), p, out, convert.RunOptions{}); err != nil {
					t.Fatalf("merge of %d parts: %v", n, err)
				}
				sameFiles(t, fmt.Sprintf("%s: single run vs %d parts merged", tc.name, n), want, outputFiles(t, out))
				// The merged directory is a finished conversion: the same command again is a resume with nothing to do.
				if _, err := runPlan(p, out, convert.RunOptions{Existing: convert.Resume}); err != nil {
					t.Fatalf("resume after merge: %v", err)
				}
				sameFiles(t, fmt.Sprintf("%s: %d parts merged, then resumed", tc.name, n), want, outputFiles(t, out))
			}
		})
	}
}

// TestPartitionCoversOnce: every output file belongs to exactly one part, for any N, and the
// partition is the same on every call.
func TestPartitionCoversOnce(t *testing.T) {
	for _, src := range []string{glm4Source(t), deepseekSource(t)} {
		p := plan(t, src, convert.Options{GroupSize: 32, MaxShardSize: 1 << 20})
		whole, err := p.Partition(1)
		if err != nil {
			t.Fatal(err)
		}
		files := len(whole[0].Units)
		for _, n := range []int{1, 2, 3, 7, files} {
			parts, err := p.Partition(n)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := p.Partition(n)
			seen := map[string]int{}
			var bytes int64
			for i, pp := range parts {
				if pp.Part.Index != i || pp.Part.Count != n || fmt.Sprint(pp.Units) != fmt.Sprint(again[i].Units) {
					t.Fatalf("%d parts: part %d is %v, differs between calls or is misnumbered", n, i, pp.Part)
				}
				for _, u := range pp.Units {
					seen[u.Key]++
				}
				bytes += pp.Bytes
			}
			for _, u := range whole[0].Units {
				if seen[u.Key] != 1 {
					t.Errorf("%d parts: %s in %d parts", n, u.Key, seen[u.Key])
				}
			}
			if len(seen) != len(whole[0].Units) || bytes != whole[0].Bytes {
				t.Errorf("%d parts: %d files, %d bytes; whole: %d files, %d bytes", n, len(seen), bytes, len(whole[0].Units), whole[0].Bytes)
			}
		}
	}
	// More parts than output files, up to a count near 2^63, are refused without allocating.
	p := plan(t, glm4Source(t), convert.Options{GroupSize: 32, MaxShardSize: 1 << 20})
	whole, _ := p.Partition(1)
	for _, n := range []int{len(whole[0].Units) + 1, 400000000, math.MaxInt} {
		if _, err := p.Partition(n); !errors.Is(err, convert.ErrBadPart) || !strings.Contains(err.Error(), "at most") {
			t.Errorf("%d parts: %v, want ErrBadPart naming the most", n, err)
		}
	}
	if _, err := convert.ParsePart("3/3"); !errors.Is(err, convert.ErrBadPart) {
		t.Errorf("part 3/3: %v, want ErrBadPart", err)
	}
	if pt, err := convert.ParsePart(" 2/7"); err != nil || pt != (convert.Part{Index: 2, Count: 7}) {
		t.Errorf("part 2/7: %v %v", pt, err)
	}
}

// TestMergeRefusesIncomplete: merge before every part finished, with parts of another plan, or
// with parts of two different splits, is refused naming the parts; nothing final is written.
func TestMergeRefusesIncomplete(t *testing.T) {
	src := glm4Source(t)
	o := convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}
	p := plan(t, src, o)
	out := filepath.Join(t.TempDir(), "split")
	merge := func() error { _, err := convert.Merge(context.Background(), p, out, convert.RunOptions{}); return err }
	if err := merge(); !errors.Is(err, convert.ErrPartsIncomplete) {
		t.Fatalf("merge of nothing: %v", err)
	}
	for _, i := range []int{0, 2} {
		if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Part: convert.Part{Index: i, Count: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	err := merge()
	if !errors.Is(err, convert.ErrPartsIncomplete) || !strings.Contains(err.Error(), "part 1/3 has not started") {
		t.Fatalf("merge with part 1 missing: %v", err)
	}
	// Parts of another plan or of another split never write into the directory.
	other := plan(t, src, convert.Options{GroupSize: 64, MaxShardSize: 1 << 20})
	if _, err := convert.Run(context.Background(), other, out, convert.RunOptions{Part: convert.Part{Index: 1, Count: 3}}); !errors.Is(err, convert.ErrOtherPlan) {
		t.Fatalf("part of another plan: %v, want ErrOtherPlan", err)
	}
	if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Part: convert.Part{Index: 0, Count: 2}}); !errors.Is(err, convert.ErrOtherPlan) {
		t.Fatalf("part of another split: %v, want ErrOtherPlan", err)
	}
	// A part journal of another plan (copied in by hand) is named at merge.
	j0, err := os.ReadFile(filepath.Join(out, ".pdq-journal.part-0000-of-0003.json"))
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(string(j0), "\n")
	head = strings.Replace(head, `"plan_id":"`, `"plan_id":"x`, 1)
	if err := os.WriteFile(filepath.Join(out, ".pdq-journal.part-0001-of-0003.json"), []byte(head+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := merge(); !errors.Is(err, convert.ErrPartsIncomplete) || !strings.Contains(err.Error(), "part 1/3 was run with another source or other options") {
		t.Fatalf("merge with part 1 of another plan: %v", err)
	}
	if err := os.WriteFile(filepath.Join(out, ".pdq-journal.part-0001-of-0002.json"), []byte(head+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := merge(); !errors.Is(err, convert.ErrPartsIncomplete) || !strings.Contains(err.Error(), "mixed") {
		t.Fatalf("merge of mixed splits: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
		t.Fatal("a refused merge wrote report.json")
	}
	// A whole conversion into a directory of parts is refused unless resumed or forced.
	if _, err := runPlan(p, out, convert.RunOptions{}); !errors.Is(err, convert.ErrSplitDir) {
		t.Fatalf("whole run into a split directory: %v", err)
	}
	if _, err := runPlan(p, out, convert.RunOptions{Part: convert.Part{Index: 0, Count: 2}, Existing: convert.Restart}); !errors.Is(err, convert.ErrBadOptions) {
		t.Fatalf("a part with Force: %v", err)
	}
}

// TestPartsInProcessesKilled: the parts of a split run as separate processes at once; one is
// killed (SIGKILL) part-way and rerun; the merge is byte-identical to an uninterrupted single run.
func TestPartsInProcessesKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs conversions in child processes")
	}
	src := resumeSource(t)
	want, slabs := resumeReference(t)
	out := filepath.Join(t.TempDir(), "split")
	const n = 3
	var wg sync.WaitGroup
	killed := make([]bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			after := int64(0)
			if i == 1 {
				after = max(1, slabs/(2*n)) // part 1 dies half-way through its share
			}
			killed[i] = runChild(t, src, out, after, 0, envPart+"="+fmt.Sprintf("%d/%d", i, n))
		}()
	}
	wg.Wait()
	if !killed[1] || killed[0] || killed[2] {
		t.Fatalf("killed %v: want part 1 killed, the others finished", killed)
	}
	p := plan(t, src, resumeOptions)
	if _, err := convert.Merge(context.Background(), p, out, convert.RunOptions{}); !errors.Is(err, convert.ErrPartsIncomplete) || !strings.Contains(err.Error(), "part 1/3 has") {
		t.Fatalf("merge with part 1 killed: %v, want ErrPartsIncomplete naming part 1", err)
	}
	if runChild(t, src, out, 0, 0, envPart+"=1/3") {
		t.Fatal("rerun of part 1 killed")
	}
	if _, err := convert.Merge(context.Background(), p, out, convert.RunOptions{}); err != nil {
		t.Fatalf("merge: %v", err)
	}
	sameFiles(t, "3 parts in processes, one killed and rerun, vs a single run", want, outputFiles(t, out))
	checkNoPartial(t, out)
}

// TestRunLocks: a second run of the same output directory, or of the same part, is refused with
// ErrBusy naming the holder; other parts proceed; a merge while a part runs is refused.
func TestRunLocks(t *testing.T) {
	src := glm4Source(t)
	p := plan(t, src, convert.Options{GroupSize: 32, MaxShardSize: 1 << 20})
	out := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(out, 0o755)
	unlock, err := fsutil.Lock(filepath.Join(out, convert.JournalName+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runPlan(p, out, convert.RunOptions{}); !errors.Is(err, convert.ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second run of a locked directory: %v, want ErrBusy naming the holder", err)
	}
	unlock()
	split := filepath.Join(t.TempDir(), "split")
	os.MkdirAll(split, 0o755)
	unlock, err = fsutil.Lock(filepath.Join(split, ".pdq-journal.part-0001-of-0002.json.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convert.Run(context.Background(), p, split, convert.RunOptions{Part: convert.Part{Index: 1, Count: 2}}); !errors.Is(err, convert.ErrBusy) {
		t.Fatalf("the same part twice: %v, want ErrBusy", err)
	}
	if _, err := convert.Run(context.Background(), p, split, convert.RunOptions{Part: convert.Part{Index: 0, Count: 2}}); err != nil {
		t.Fatalf("another part beside a running one: %v", err)
	}
	os.WriteFile(filepath.Join(split, ".pdq-journal.part-0001-of-0002.json"), []byte(`{"plan_id":"`+p.ID()+`"}`+"\n"), 0o644)
	if _, err := convert.Merge(context.Background(), p, split, convert.RunOptions{}); !errors.Is(err, convert.ErrPartsIncomplete) || !strings.Contains(err.Error(), "part 1/2 is still running") {
		t.Fatalf("merge while part 1 runs: %v", err)
	}
	unlock()
}

// TestMergeRefusesDamagedPart: a part's shard damaged after the part finished (same size, a few
// bytes overwritten) is refused by the merge, as a resume of a single run refuses it by its
// recorded CRC-32C; running the part again redoes the file and the merge then succeeds.
func TestMergeRefusesDamagedPart(t *testing.T) {
	src := glm4Source(t)
	o := convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}
	p := plan(t, src, o)
	out := filepath.Join(t.TempDir(), "split")
	for i := range 2 {
		if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Part: convert.Part{Index: i, Count: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := p.Partition(2)
	if err != nil {
		t.Fatal(err)
	}
	key := parts[1].Units[0].Key
	f, err := os.OpenFile(filepath.Join(out, filepath.FromSlash(key)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, fi.Size()-8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = convert.Merge(context.Background(), p, out, convert.RunOptions{})
	if !errors.Is(err, convert.ErrPartsIncomplete) || !strings.Contains(err.Error(), "part 1/2 has 1 of") || !strings.Contains(err.Error(), "changed") || !strings.Contains(err.Error(), key) {
		t.Fatalf("merge with a damaged shard of part 1: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
		t.Fatal("a refused merge wrote report.json")
	}
	if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Part: convert.Part{Index: 1, Count: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := convert.Merge(context.Background(), p, out, convert.RunOptions{}); err != nil {
		t.Fatalf("merge after the part ran again: %v", err)
	}
}
