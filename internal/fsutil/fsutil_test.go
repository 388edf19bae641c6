package fsutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteAtomic: the file appears complete or not at all; a failed fill leaves the old file
// and no temporary; a hard link planted under the temporary name is not written through.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFileAtomic(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := WriteAtomic(path, func(w io.Writer) error { w.Write([]byte("tw")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed fill: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one" {
		t.Fatalf("after a failed write: %q", b)
	}
	if _, err := os.Stat(PartialName(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary left: %v", err)
	}
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	if err := os.Link(victim, PartialName(path)); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("written through a planted hard link: %q", b)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("got %q", b)
	}
	n, sum, err := HashFile(context.Background(), path)
	if err != nil || n != 3 || sum != "3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3" {
		t.Fatalf("hash: %d %s %v", n, sum, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := HashFile(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled hash: %v", err)
	}
}

// TestLock: a second Lock of the same file fails with ErrLocked naming the holder; after
// unlock it succeeds again and the file is gone.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(path); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrLocked naming this process", err)
	}
	unlock()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file left: %v", err)
	}
	unlock2, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}
