package convert_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"pdq/internal/testfs"
	"pdq/quantize/convert"
)

// TestPrefillClone: on XFS the prefill shards of an FP8 source are clones sharing every block
// with the source (PrefillCopy, the default), or written (PrefillWrite); both runs, and a cloned
// run cancelled half-way and resumed, end byte-identical, each source byte read once.
func TestPrefillClone(t *testing.T) {
	dir := testfs.XFS(t, 0)
	src := copyTree(t, deepseekSource(t), filepath.Join(dir, "src"))
	shared := func(out string) (int64, int64) {
		var n, size int64
		for _, s := range plan(t, src, copyOptions).Source.Shards {
			n += testfs.SharedBytes(t, filepath.Join(out, "prefill", s.Name))
			size += s.Size
		}
		return n, size
	}

	var slabs atomic.Int64
	outs := map[convert.PrefillMode]string{}
	for _, mode := range []convert.PrefillMode{convert.PrefillWrite, convert.PrefillCopy} {
		out := filepath.Join(dir, "out-"+string(mode))
		p := plan(t, src, copyOptions)
		if _, err := runPlan(p, out, convert.RunOptions{Workers: 2, PrefillMode: mode, Progress: func(int64, int64, string) { slabs.Add(1) }}); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		n, size := shared(out)
		if got := p.Source.BytesRead(); got != size {
			t.Errorf("%s: %d source bytes read for %d in the shards (each must be read once)", mode, got, size)
		}
		if mode == convert.PrefillCopy && n < size&^4095 || mode == convert.PrefillWrite && n != 0 {
			t.Errorf("%s: %d of %d prefill bytes shared with the source", mode, n, size)
		}
		checkNoPartial(t, out)
		outs[mode] = out
	}
	want := outputFiles(t, outs[convert.PrefillWrite])
	sameFiles(t, "cloned vs written prefill", want, outputFiles(t, outs[convert.PrefillCopy]))

	// A cancelled run keeps its finished clones: the resumed run finds each with the checksum
	// the journal has for it (a wrong one would have it redone, to the same bytes).
	out := filepath.Join(dir, "out-resumed")
	ctx, cancel := context.WithCancel(context.Background())
	var n, cloned atomic.Int64
	var once sync.Once
	half := slabs.Load() / 4 // counted over both runs
	ro := convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
		if n.Add(1) >= half {
			once.Do(cancel)
		}
	}}
	ro.Events.ShardDone = func(e convert.ShardEvent) {
		if e.Cloned {
			cloned.Add(1)
		}
	}
	_, err := convert.Run(ctx, plan(t, src, copyOptions), out, ro)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", err)
	}
	if cloned.Load() == 0 {
		t.Fatal("the cancelled run finished no clone to keep")
	}
	ro = convert.RunOptions{Workers: 2, Existing: convert.Resume}
	var kept int
	ro.Events.Resumed = func(ri convert.ResumeInfo) { kept = ri.PrefillDone }
	if _, err := runPlan(plan(t, src, copyOptions), out, ro); err != nil {
		t.Fatal(err)
	}
	if kept != int(cloned.Load()) {
		t.Errorf("resumed run kept %d prefill shards of the %d clones finished", kept, cloned.Load())
	}
	sameFiles(t, "resumed cloned run vs written", want, outputFiles(t, out))
	checkNoPartial(t, out)
}

// TestPrefillCloneSourceRewritten: a source shard written while its clone is being made, its
// modification time set back, fails the run (the clone holds other bytes than the checksum and
// decode/ were made from); nothing looks finished.
func TestPrefillCloneSourceRewritten(t *testing.T) {
	dir := testfs.XFS(t, 0)
	src := copyTree(t, deepseekSource(t), filepath.Join(dir, "src"))
	p := plan(t, src, copyOptions)
	sh := p.Source.Shards[len(p.Source.Shards)-1]
	var once sync.Once
	var werr error
	ro := convert.RunOptions{Workers: 1, Progress: func(int64, int64, string) {
		once.Do(func() { // the last weight byte of the last shard, put back as it was dated
			f, err := os.OpenFile(sh.Path, os.O_RDWR, 0)
			if err != nil {
				werr = err
				return
			}
			defer f.Close()
			b := make([]byte, 1)
			if _, werr = f.ReadAt(b, sh.Size-1); werr == nil {
				b[0] ^= 1
				_, werr = f.WriteAt(b, sh.Size-1)
			}
			if werr == nil {
				werr = os.Chtimes(sh.Path, sh.ModTime, sh.ModTime)
			}
		})
	}}
	out := filepath.Join(dir, "out")
	_, err := runPlan(p, out, ro)
	if werr != nil {
		t.Fatal(werr)
	}
	if !errors.Is(err, convert.ErrSourceChanged) {
		t.Fatalf("run with a source shard rewritten: %v, want ErrSourceChanged", err)
	}
	if _, err := os.Stat(filepath.Join(out, "prefill", sh.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("prefill/%s looks finished: %v", sh.Name, err)
	}
	checkNoPartial(t, out)
}
