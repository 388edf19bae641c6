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
	src := filepath.Join(dir, "src")
	for name, b := range readTree(t, deepseekSource(t)) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
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

	out := filepath.Join(dir, "out-resumed")
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var once sync.Once
	half := slabs.Load() / 4 // counted over both runs
	_, err := convert.Run(ctx, plan(t, src, copyOptions), out, convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
		if n.Add(1) >= half {
			once.Do(cancel)
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", err)
	}
	if _, err := runPlan(plan(t, src, copyOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "resumed cloned run vs written", want, outputFiles(t, out))
	checkNoPartial(t, out)
}
