package convert_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
)

// copyOptions plan the FP8 copy tests: small decode shards, many slabs.
var copyOptions = convert.Options{GroupSize: 32, MaxShardSize: 1 << 20, Method: quantize.MethodRTN}

// TestSourceReadOnce: converting an FP8 source reads each of its bytes once: the prefill copy
// is written from the slabs the conversion reads, plus the few bytes no slab covers, and the
// copies are the source's bytes. It holds for both outputs, for prefill alone, and on 1 and 3
// workers.
func TestSourceReadOnce(t *testing.T) {
	src := deepseekSource(t)
	for _, c := range []struct {
		name    string
		only    convert.OutputKind
		workers int
		readers int
	}{{"both", "", 1, 0}, {"both", "", 3, 0}, {"prefill", convert.KindPrefill, 2, 0}, {"both, 3 readers", "", 2, 3}} {
		o := copyOptions
		o.Only = c.only
		p := plan(t, src, o)
		out := filepath.Join(t.TempDir(), "out")
		if _, err := runPlan(p, out, convert.RunOptions{Workers: c.workers, Readers: c.readers}); err != nil {
			t.Fatalf("%s, %d workers: %v", c.name, c.workers, err)
		}
		var size int64
		for _, s := range p.Source.Shards {
			size += s.Size
			sameBytes(t, s.Path, filepath.Join(out, "prefill", s.Name))
		}
		if got := p.Source.BytesRead(); got != size {
			t.Errorf("%s, %d workers: %d source bytes read for %d in the shards (each must be read once)", c.name, c.workers, got, size)
		}
		checkNoPartial(t, out)
	}
}

// sameBytes fails unless files a and b hold the same bytes.
func sameBytes(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(x) != string(y) {
		t.Errorf("%s: %d bytes, not the %d bytes of %s", b, len(y), len(x), a)
	}
}

// TestCopyResume: a cancelled FP8 conversion leaves no copy that looks finished; the resumed
// run makes the missing copies (reading, for a shard whose converted tensors were all kept, its
// modules for the copy alone) and ends byte-identical to an uninterrupted run.
func TestCopyResume(t *testing.T) {
	src := deepseekSource(t)
	ref := filepath.Join(t.TempDir(), "ref")
	var slabs atomic.Int64
	if _, err := runPlan(plan(t, src, copyOptions), ref, convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) { slabs.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	want := outputFiles(t, ref)
	for _, at := range []int64{2, slabs.Load() / 2, slabs.Load() - 1} {
		out := filepath.Join(t.TempDir(), "out")
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int64
		var once sync.Once
		ro := convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
			if n.Add(1) >= at {
				once.Do(cancel)
			}
		}}
		_, err := convert.Run(ctx, plan(t, src, copyOptions), out, ro)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancel after %d slabs: %v, want context.Canceled", at, err)
		}
		ents, _ := os.ReadDir(filepath.Join(out, "prefill"))
		for _, e := range ents {
			if e.Name()[0] != '.' {
				if _, ok := want["prefill/"+e.Name()]; !ok {
					t.Errorf("cancel after %d slabs: prefill/%s is no copy of the source", at, e.Name())
				}
			}
		}
		if _, err := runPlan(plan(t, src, copyOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err != nil {
			t.Fatalf("resume after %d slabs: %v", at, err)
		}
		sameFiles(t, "resumed FP8 conversion vs uninterrupted", want, outputFiles(t, out))
		checkNoPartial(t, out)
	}
}

// TestPrefillLink: with PrefillLink the prefill shards are hard links to the source's on the
// same file system (no byte copied), and copies of the same bytes on another one.
func TestPrefillLink(t *testing.T) {
	src := deepseekSource(t)
	dirs := []string{filepath.Join(filepath.Dir(src), "linked-"+t.Name())}
	t.Cleanup(func() { os.RemoveAll(dirs[0]) })
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && device(t, src) != device(t, "/dev/shm") {
		if d, err := os.MkdirTemp("/dev/shm", "pdq-link-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, filepath.Join(d, "out"))
		}
	}
	for i, out := range dirs {
		p := plan(t, src, copyOptions)
		if _, err := runPlan(p, out, convert.RunOptions{Workers: 2, PrefillMode: convert.PrefillLink}); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		for _, s := range p.Source.Shards {
			dst := filepath.Join(out, "prefill", s.Name)
			a, errA := os.Stat(s.Path)
			b, errB := os.Stat(dst)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if linked := os.SameFile(a, b); linked != (i == 0) {
				t.Errorf("%s: hard link %v, want %v", dst, linked, i == 0)
			}
			sameBytes(t, s.Path, dst)
		}
		// The same checkpoint as a copy makes.
		ref := filepath.Join(t.TempDir(), "ref")
		convertTo(t, src, ref, copyOptions, convert.RunOptions{Workers: 2})
		sameFiles(t, "linked vs copied prefill", outputFiles(t, ref), outputFiles(t, out))
	}
}

// device is the file system a path lies on.
func device(t *testing.T, path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Dev)
}

// TestPrefillWrittenSourceChmod: where the prefill copies are written (no clones here), a
// change of a source shard's metadata alone during the run (a chmod moves its status-change
// time, as a hard link made to it does) is no change of its bytes: the run succeeds, in the
// default mode as with PrefillWrite.
func TestPrefillWrittenSourceChmod(t *testing.T) {
	dir := t.TempDir()
	src := copyTree(t, deepseekSource(t), filepath.Join(dir, "src"))
	for _, mode := range []convert.PrefillMode{convert.PrefillCopy, convert.PrefillWrite} {
		p := plan(t, src, copyOptions)
		sh := p.Source.Shards[len(p.Source.Shards)-1]
		var once sync.Once
		var cerr error
		ro := convert.RunOptions{Workers: 1, PrefillMode: mode, Progress: func(int64, int64, string) {
			once.Do(func() { cerr = os.Chmod(sh.Path, 0o640) })
		}}
		out := filepath.Join(dir, "out-"+string(mode))
		if _, err := runPlan(p, out, ro); err != nil {
			t.Fatalf("%s: run with a shard's mode changed: %v", mode, err)
		}
		if cerr != nil {
			t.Fatal(cerr)
		}
		sameBytes(t, sh.Path, filepath.Join(out, "prefill", sh.Name))
		if err := os.Chmod(sh.Path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
