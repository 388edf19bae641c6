package convert_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pdq/internal/fsutil"
	"pdq/quantize/convert"
	"pdq/safetensors"
	"pdq/synth"
)

// resumeOptions plan the resume and cancellation tests: small output shards, so that a run is
// cut in the middle of many of them.
var resumeOptions = convert.Options{GroupSize: 32, MaxShardSize: 512 << 10}

// resumeSource is a GLM-4-style checkpoint of four layers (shared, read-only).
func resumeSource(t testing.TB) string {
	return shared(t, "resume-src", func(dir string) error {
		m := synth.Tiny(synth.StyleGLM4)
		m.Layers = 4
		return generateInto(dir, synth.Options{Model: m, Seed: 5, MaxShardBytes: 1 << 20})
	})
}

// resumeReference is the uninterrupted conversion of resumeSource and its number of slabs.
func resumeReference(t testing.TB) (files map[string][]byte, slabs int64) {
	src := resumeSource(t)
	var n atomic.Int64
	out := shared(t, "resume-ref", func(dir string) error {
		p := plan(t, src, resumeOptions)
		_, err := runPlan(p, dir, convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) { n.Add(1) }})
		if err == nil {
			err = os.WriteFile(dir+".slabs", []byte(strconv.FormatInt(n.Load(), 10)), 0o644)
		}
		return err
	})
	b, err := os.ReadFile(out + ".slabs")
	if err != nil {
		t.Fatal(err)
	}
	slabs, _ = strconv.ParseInt(string(b), 10, 64)
	return outputFiles(t, out), slabs
}

// Environment of the child process of TestResumeAfterKill.
const (
	envChild     = "PDQ_CONVERT_TEST_CHILD"
	envSrc       = "PDQ_CONVERT_TEST_SRC"
	envOut       = "PDQ_CONVERT_TEST_OUT"
	envKillAfter = "PDQ_CONVERT_TEST_KILL_AFTER_SLABS"
	envKillDelay = "PDQ_CONVERT_TEST_KILL_AFTER"
	envPart      = "PDQ_CONVERT_TEST_PART"    // I/N: the child converts that part only
	envOptions   = "PDQ_CONVERT_TEST_OPTIONS" // JSON convert.Options instead of resumeOptions
	envCalib     = "PDQ_CONVERT_TEST_CALIB"   // a statistics file for the options
)

// TestHelperConvertChild is not a test: TestResumeAfterKill runs the test binary again with
// this test selected to convert in a process that kills itself (SIGKILL) part-way.
func TestHelperConvertChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("helper process of TestResumeAfterKill")
	}
	die := func() {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
	after, _ := strconv.ParseInt(os.Getenv(envKillAfter), 10, 64)
	if d, err := time.ParseDuration(os.Getenv(envKillDelay)); err == nil && d > 0 {
		time.AfterFunc(d, die)
	}
	var n atomic.Int64
	ro := convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
		if n.Add(1) == after {
			die()
		}
	}}
	if s := os.Getenv(envPart); s != "" {
		pt, err := convert.ParsePart(s)
		if err != nil {
			t.Fatal(err)
		}
		ro.Part = pt
	}
	o := resumeOptions
	if s := os.Getenv(envOptions); s != "" {
		if err := json.Unmarshal([]byte(s), &o); err != nil {
			t.Fatal(err)
		}
	}
	if p := os.Getenv(envCalib); p != "" {
		o.Calib = openStats(t, p)
	}
	if _, err := runPlan(plan(t, os.Getenv(envSrc), o), os.Getenv(envOut), ro); err != nil {
		t.Fatal(err)
	}
}

// runChild converts in a child process that kills itself after slabs slabs or after delay; it
// reports whether the child was killed (it may finish first).
func runChild(t *testing.T, src, out string, slabs int64, delay time.Duration, env ...string) bool {
	killed, err := tryChild(src, out, slabs, delay, env...)
	if err != nil {
		t.Fatal(err)
	}
	return killed
}

// tryChild is runChild returning the child's failure (callable from any goroutine).
func tryChild(src, out string, slabs int64, delay time.Duration, env ...string) (bool, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperConvertChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envSrc+"="+src, envOut+"="+out,
		envKillAfter+"="+strconv.FormatInt(slabs, 10), envKillDelay+"="+delay.String())
	cmd.Env = append(cmd.Env, env...)
	outb, err := cmd.CombinedOutput()
	if err == nil {
		return false, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	return false, fmt.Errorf("child: %v\n%s", err, outb)
}

// checkUnfinished: an interrupted output directory holds nothing that looks finished but is
// not: an output with an index is complete (its config.json, written just before, too), the
// report exists only when both outputs are, and every shard under its final name is complete.
func checkUnfinished(t *testing.T, out string) {
	if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
		// report.json is written last: a kill that came after it found a finished run, whose
		// outputs must then both be complete.
		for _, kind := range []string{"prefill", "decode"} {
			if _, err := os.Stat(filepath.Join(out, kind, safetensors.IndexFileName)); err != nil {
				t.Errorf("report.json exists but %s has no index", kind)
			}
		}
	}
	for _, kind := range []string{"prefill", "decode"} {
		ents, err := os.ReadDir(filepath.Join(out, kind))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(out, kind, safetensors.IndexFileName)); err == nil {
			// The index is written last: an output with an index must be complete.
			ck, err := safetensors.Open(filepath.Join(out, kind))
			if err != nil {
				t.Errorf("%s has an index but does not open: %v", kind, err)
			} else {
				ck.Close()
			}
			if _, err := os.Stat(filepath.Join(out, kind, "config.json")); err != nil {
				t.Errorf("%s has an index but no config.json", kind)
			}
			continue
		}
		for _, e := range ents {
			name := e.Name()
			path := filepath.Join(out, kind, name)
			switch {
			case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".partial"):
			case strings.HasSuffix(name, ".safetensors"):
				ck, err := safetensors.Open(path)
				if err != nil {
					t.Errorf("%s/%s is not a complete safetensors file: %v", kind, name, err)
					continue
				}
				ck.Close()
			default: // side files, then config.json, come before the index, which marks the output complete
			}
		}
	}
}

// TestResumeAfterKill kills a conversion (kill -9) after the first slab, in the middle, near the
// end and at a random time, checks what it left, and resumes it: the result is byte-identical to
// an uninterrupted run.
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs several conversions in child processes")
	}
	src := resumeSource(t)
	want, slabs := resumeReference(t)
	if slabs < 20 {
		t.Fatalf("only %d slabs", slabs)
	}
	t0 := time.Now()
	runChild(t, src, filepath.Join(t.TempDir(), "timing"), 0, 0)
	full := time.Since(t0)
	cases := []struct {
		name  string
		slabs int64
		delay time.Duration
	}{
		{"first-slab", 1, 0},
		{"middle", slabs / 2, 0},
		{"near-end", slabs - 2, 0},
		{"random-time", 0, time.Duration(rand.Int64N(int64(full)) + 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			killed := runChild(t, src, out, tc.slabs, tc.delay)
			if !killed && tc.delay == 0 {
				t.Fatalf("child finished without being killed after %d of %d slabs", tc.slabs, slabs)
			}
			left, journaled := countShards(t, out), journaledShards(t, out)
			if killed {
				t.Logf("killed after %d slabs / %v; left %d finished shard files, %d journaled", tc.slabs, tc.delay, left, journaled)
				checkUnfinished(t, out)
			} else {
				t.Logf("the child finished within %v", tc.delay)
			}
			var redone atomic.Int64
			ro := convert.RunOptions{Workers: 2, Existing: convert.Resume, Progress: func(int64, int64, string) { redone.Add(1) }}
			if _, err := runPlan(plan(t, src, resumeOptions), out, ro); err != nil {
				t.Fatalf("resume: %v", err)
			}
			// A shard renamed into place but killed before its journal line is redone; one with
			// its line must not be.
			if journaled > 0 && redone.Load() >= slabs {
				t.Errorf("resume redid all %d slabs although %d shards were journaled (%d files)", redone.Load(), journaled, left)
			}
			sameFiles(t, "resumed vs uninterrupted", want, outputFiles(t, out))
			checkNoPartial(t, out)
		})
	}
}

func countShards(t *testing.T, out string) int {
	n := 0
	for _, kind := range []string{"prefill", "decode"} {
		ents, _ := os.ReadDir(filepath.Join(out, kind))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				n++
			}
		}
	}
	return n
}

// journaledShards counts the finished-shard lines of out's journal.
func journaledShards(t *testing.T, out string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, convert.JournalName))
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Key    string  `json:"key"`
			Tensor string  `json:"tensor"`
			Size   int64   `json:"size"`
			CRC32C *uint32 `json:"crc32c"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Key == "" || e.Tensor != "" {
			continue // the plan line, a tensor's line, or a line torn by the kill
		}
		// The checksum the writer took as the bytes passed must be the file's.
		size, sum, err := fsutil.CRCFile(context.Background(), filepath.Join(out, filepath.FromSlash(e.Key)))
		if e.CRC32C == nil {
			t.Errorf("journaled shard %s has no crc32c", e.Key)
		} else if err != nil || size != e.Size || sum != *e.CRC32C {
			t.Errorf("journaled shard %s: size %d crc32c %08x, file has %d %08x (%v)", e.Key, e.Size, *e.CRC32C, size, sum, err)
		}
		n++
	}
	return n
}

// checkNoPartial fails if any temporary file is left under out.
func checkNoPartial(t *testing.T, out string) {
	t.Helper()
	for name := range readTree(t, out) {
		if strings.HasSuffix(name, ".partial") {
			t.Errorf("%s left behind", name)
		}
	}
}

// TestCancel cancels a conversion from its progress callback: Run stops within a few slabs
// with context.Canceled, leaves nothing that looks finished and no index (the temporary files of
// unfinished shards stay, hidden, for the rerun), and a resumed run completes byte-identical to
// an uninterrupted one and leaves no temporary file.
func TestCancel(t *testing.T) {
	src := resumeSource(t)
	want, slabs := resumeReference(t)
	const workers = 2
	for _, at := range []int64{3, slabs / 2} {
		out := filepath.Join(t.TempDir(), "out")
		ctx, cancel := context.WithCancel(context.Background())
		var n, after atomic.Int64
		var once sync.Once
		ro := convert.RunOptions{Workers: workers, Progress: func(int64, int64, string) {
			if n.Add(1) >= at {
				once.Do(cancel)
				after.Add(1)
			}
		}}
		_, err := convert.Run(ctx, plan(t, src, resumeOptions), out, ro)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancel after %d slabs: Run returned %v, want context.Canceled", at, err)
		}
		// Slabs already read may finish: those with the workers and those queued for them.
		if extra := after.Load() - 1; extra > 2*workers+1 {
			t.Errorf("cancel after %d slabs: %d more slabs finished after the cancellation", at, extra)
		}
		checkUnfinished(t, out)
		if _, err := os.Stat(filepath.Join(out, "decode", safetensors.IndexFileName)); err == nil {
			t.Errorf("decode index written by a cancelled run")
		}
		if _, err := runPlan(plan(t, src, resumeOptions), out, convert.RunOptions{Workers: workers, Existing: convert.Resume}); err != nil {
			t.Fatalf("resume: %v", err)
		}
		sameFiles(t, "resumed after cancel vs uninterrupted", want, outputFiles(t, out))
		checkNoPartial(t, out)
	}
}

// TestResumeKeepsTensors: with one output shard per output, an interrupted run's finished
// tensors are kept (checked by CRC-32C) and a resume redoes only the rest; a kept tensor whose
// bytes were damaged since is redone; the result is byte-identical to an uninterrupted run.
func TestResumeKeepsTensors(t *testing.T) {
	src := resumeSource(t)
	o := resumeOptions
	o.MaxShardSize = 1 << 40 // one shard per output: shard-grain resume would redo everything
	ref := filepath.Join(t.TempDir(), "ref")
	var total atomic.Int64
	if _, err := runPlan(plan(t, src, o), ref, convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) { total.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	want := outputFiles(t, ref)
	for _, damage := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "out")
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int64
		ro := convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
			if n.Add(1) == total.Load()*2/3 {
				cancel()
			}
		}}
		if _, err := convert.Run(ctx, plan(t, src, o), out, ro); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled run: %v", err)
		}
		cancel()
		checkUnfinished(t, out)
		if damage {
			matches, _ := filepath.Glob(filepath.Join(out, "decode", ".*.partial"))
			if len(matches) != 1 {
				t.Fatalf("decode temporary files: %v", matches)
			}
			f, err := os.OpenFile(matches[0], os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			b := make([]byte, 1)
			for off := fi.Size() / 10; off < fi.Size(); off += fi.Size() / 10 { // flip a byte in several places
				f.ReadAt(b, off)
				b[0] ^= 0x55
				f.WriteAt(b, off)
			}
			f.Close()
		}
		var redone atomic.Int64
		if _, err := runPlan(plan(t, src, o), out, convert.RunOptions{Workers: 2, Existing: convert.Resume, Progress: func(int64, int64, string) { redone.Add(1) }}); err != nil {
			t.Fatalf("resume: %v", err)
		}
		t.Logf("damaged %v: %d of %d slabs redone after an interruption at 2/3", damage, redone.Load(), total.Load())
		if !damage && redone.Load() > total.Load()/2 {
			t.Errorf("resume redid %d of %d slabs: the finished tensors were not kept", redone.Load(), total.Load())
		}
		sameFiles(t, fmt.Sprintf("resumed (damaged %v) vs uninterrupted", damage), want, outputFiles(t, out))
		checkNoPartial(t, out)
	}
}

// TestReviewResumeAfterSourceChanged: a run that stopped with ErrSourceChanged has shards made
// from the source as it was; resuming it (what rerunning the same command does) must not finish
// the output from the changed source and call it complete.
func TestResumeAfterSourceChanged(t *testing.T) {
	src := copyDir(t, smallSource(t))
	ents, _ := os.ReadDir(src)
	var first string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".safetensors") {
			first = filepath.Join(src, e.Name())
			break
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	var once sync.Once
	ro := convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
		once.Do(func() {
			later := time.Now().Add(time.Hour)
			os.Chtimes(first, later, later)
		})
	}}
	if _, err := runPlan(plan(t, src, smallOptions), out, ro); !errors.Is(err, convert.ErrSourceChanged) {
		t.Fatalf("first run: got %v, want ErrSourceChanged", err)
	}
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err == nil {
		t.Fatal("resume over a source that changed during the interrupted run succeeded")
	}
	// Starting over is the way out.
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Restart}); err != nil {
		t.Fatalf("force: %v", err)
	}
}

// TestResumeRedoesDamagedShard: a finished shard whose bytes changed since it was journaled
// (same size, one byte flipped) fails its CRC-32C on resume and is redone; the result is
// byte-identical to an uninterrupted run.
func TestResumeRedoesDamagedShard(t *testing.T) {
	src := resumeSource(t)
	want, _ := resumeReference(t)
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, resumeOptions, convert.RunOptions{Workers: 2})
	shards, _ := filepath.Glob(filepath.Join(out, "decode", "model-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("decode shards: %v", shards)
	}
	f, err := os.OpenFile(shards[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	b := []byte{0}
	f.ReadAt(b, fi.Size()-1)
	b[0] ^= 1
	f.WriteAt(b, fi.Size()-1)
	f.Close()
	var redone atomic.Int64
	if _, err := runPlan(plan(t, src, resumeOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume, Progress: func(int64, int64, string) { redone.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	if redone.Load() == 0 {
		t.Fatal("the damaged shard was not redone")
	}
	sameFiles(t, "resumed after a damaged shard vs uninterrupted", want, outputFiles(t, out))
}
