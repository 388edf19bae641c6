package fsutil

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestPreallocate sizes a file that already holds a prefix: the prefix stays, the rest reads as
// zeros, and the size is the one asked for.
func TestPreallocate(t *testing.T) {
	for _, size := range []int64{0, 5, 4096, 1 << 20} {
		path := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("head")
		if _, err := f.Write(prefix); err != nil {
			t.Fatal(err)
		}
		if err := Preallocate(f, size); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		copy(want, prefix)
		if !bytes.Equal(got, want) {
			t.Errorf("size %d: file is %d bytes, prefix %q (want %d bytes, the prefix, zeros)", size, len(got), got[:min(len(got), 4)], size)
		}
	}
}

// TestPreallocateNoSpace asks for more than a small file system holds: the error wraps ENOSPC and
// names the file, before anything is written (Linux, where the blocks are reserved at once).
func TestPreallocateNoSpace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux reserves the blocks up front")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = Preallocate(f, 64<<20)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "big") {
		t.Fatalf("preallocating 64 MiB on a 1 MiB file system: %v, want ENOSPC naming the file", err)
	}
}
