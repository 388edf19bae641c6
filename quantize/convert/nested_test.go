package convert_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"pdq/internal/fsutil"
	"pdq/quantize/convert"
)

// TestRefusesOutputInsideAnother: an output inside another conversion's output, finished or
// still running (its lock held), is refused for a fresh run, a resume, a forced restart, a part
// and a merge; a resume of a non-empty directory without a journal is refused too.
func TestRefusesOutputInsideAnother(t *testing.T) {
	src := glm4Source(t)
	o := convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}
	p := plan(t, src, o)
	root := t.TempDir()
	done := filepath.Join(root, "A")
	if _, err := runPlan(p, done, convert.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	running := filepath.Join(root, "B")
	if err := os.MkdirAll(running, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := fsutil.Lock(filepath.Join(running, convert.JournalName+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, dir := range []string{filepath.Join(done, "decode"), filepath.Join(done, "x", "y"), filepath.Join(running, "decode")} {
		for _, ro := range []convert.RunOptions{{}, {Existing: convert.Resume}, {Existing: convert.Restart}, {Part: convert.Part{Index: 0, Count: 2}}} {
			if _, err := runPlan(p, dir, ro); !errors.Is(err, convert.ErrInsideOutput) {
				t.Errorf("run into %s (%+v): %v, want ErrInsideOutput", dir, ro.Existing, err)
			}
		}
		if _, err := convert.Merge(context.Background(), p, dir, convert.RunOptions{}); !errors.Is(err, convert.ErrInsideOutput) {
			t.Errorf("merge into %s: %v, want ErrInsideOutput", dir, err)
		}
	}
	// The finished outputs are untouched: nothing was written inside them.
	if _, err := os.Stat(filepath.Join(done, "decode", "decode")); err == nil {
		t.Error("a refused run wrote inside the other conversion's output")
	}
	// Beside the other conversion is fine.
	if _, err := runPlan(p, filepath.Join(root, "C"), convert.RunOptions{}); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(root, "D")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runPlan(p, other, convert.RunOptions{Existing: convert.Resume}); !errors.Is(err, convert.ErrNothingToResume) {
		t.Fatalf("resume of a directory without a journal: %v, want ErrNothingToResume", err)
	}
	if _, err := runPlan(p, filepath.Join(root, "E"), convert.RunOptions{Existing: convert.Resume}); err != nil {
		t.Fatalf("resume of a new directory starts the conversion: %v", err)
	}
}
