package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// finalNames lists what DIR holds besides pull's working folder.
func finalNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != pullState {
			names = append(names, e.Name())
		}
	}
	return names
}

// An interrupted pull leaves nothing under a final name, not even the small files (config.json,
// the index) that finish first: a directory that looks like a checkpoint holds all of it. The
// rerun resumes and places everything, the index last.
func TestPullPlacesNothingUntilComplete(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Files go in manifest order with Parallel 1: config.json, empty.bin, extra/notes.txt and
	// the first shard are finished when the second shard's first range is written.
	opts := PullOptions{PartSize: 1 << 20, Parallel: 1, Log: discardLog, OnRange: func(key string, i int) {
		if strings.HasSuffix(key, "model-00002-of-00002.safetensors") {
			cancel()
		}
	}}
	if _, err := Pull(ctx, st, out, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pull: %v", err)
	}
	if names := finalNames(t, out); len(names) != 0 {
		t.Fatalf("an interrupted pull left %v under final names", names)
	}
	opts.OnRange = nil
	res, err := Pull(context.Background(), st, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	reused := 0
	for _, f := range res.Files {
		reused += f.RangesReused
	}
	if reused == 0 {
		t.Errorf("the rerun reused nothing: %+v", res.Files)
	}
	sameTree(t, src, out)
	if r := placeRank("model.safetensors.index.json"); r <= placeRank("config.json") || placeRank("config.json") <= placeRank("model-00001-of-00002.safetensors") {
		t.Error("the index is not placed last, or config.json not after the shards")
	}
}

// What is in the way is listed before a working folder is made: none is left behind. A symbolic
// link at a final name (leading out of DIR, nowhere, or to other bytes) is "a different file in
// the way", never a low-level path error.
func TestPullConflictsLeaveNoState(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"model_type": "test"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		plant func(out string) error
	}{
		{"another config.json", func(out string) error {
			return os.WriteFile(filepath.Join(out, "config.json"), []byte("{}"), 0o644)
		}},
		{"a link out of DIR", func(out string) error { return os.Symlink(outside, filepath.Join(out, "config.json")) }},
		{"a dangling link", func(out string) error {
			return os.Symlink(filepath.Join(out, "nowhere"), filepath.Join(out, "config.json"))
		}},
		{"a link out of DIR as a parent", func(out string) error {
			return os.Symlink(filepath.Dir(outside), filepath.Join(out, "extra"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			if err := tc.plant(out); err != nil {
				t.Fatal(err)
			}
			_, err := Pull(context.Background(), st, out, PullOptions{Log: discardLog})
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "a different file is in the way") {
				t.Fatalf("pull: %v, want the list of files in the way", err)
			}
			if _, err := os.Lstat(filepath.Join(out, pullState)); !os.IsNotExist(err) {
				t.Errorf("the refused pull left %s: %v", pullState, err)
			}
		})
	}
}

// If the last rename fails (here a directory appeared at the index's name during the pull), the
// files renamed before it go back to the working folder: no final name holds a file of the
// unfinished pull. Once the directory is gone, the rerun places everything without downloading.
func TestPullPlacementUndone(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	blocker := filepath.Join(out, "model.safetensors.index.json")
	planted := false
	opts := PullOptions{PartSize: 1 << 20, Parallel: 1, Log: discardLog, OnRange: func(string, int) {
		if !planted {
			planted = true
			if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
				t.Error(err)
			}
		}
	}}
	if _, err := Pull(context.Background(), st, out, opts); err == nil {
		t.Fatal("pull placed a file over a directory")
	}
	if names := finalNames(t, out); len(names) != 1 || names[0] != "model.safetensors.index.json" {
		t.Fatalf("after a failed placement DIR holds %v, want only the planted directory", names)
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	opts.OnRange = nil
	res, err := Pull(context.Background(), st, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Files {
		if f.RangesFetched > 0 {
			t.Errorf("%s fetched again after the failed placement", f.Path)
		}
	}
	sameTree(t, src, out)
}
