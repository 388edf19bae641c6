package fsutil

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestCopyAtomic: every size around the chunk and block edges arrives intact with its
// checksum, through direct writes where the temporary directory's file system takes them.
func TestCopyAtomic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dirs := []string{t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "pdq-copy-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, d) // tmpfs: direct I/O refused or emulated, either way correct
		}
	}
	for _, dir := range dirs {
		before := directBytes.Load()
		for _, n := range []int{0, 1, 511, 4095, 4096, 4097, copyChunk - 1, copyChunk, copyChunk + 1, 2*copyChunk + 12345} {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			path := filepath.Join(dir, "out")
			h := CRC32C()
			got, err := CopyAtomic(context.Background(), path, 0o640, bytes.NewReader(data), h)
			if err != nil || got != int64(n) {
				t.Fatalf("%s: copy of %d bytes: %d, %v", dir, n, got, err)
			}
			back, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("%s: %d bytes copied, %d read back differ (%v)", dir, n, len(back), err)
			}
			if h.Sum32() != crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatalf("%s: checksum of %d bytes wrong", dir, n)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640&^umask() {
				t.Fatalf("%s: mode %v", dir, fi.Mode())
			}
			if _, err := os.Stat(PartialName(path)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: temporary file left: %v", dir, err)
			}
		}
		t.Logf("%s: %d bytes written directly", dir, directBytes.Load()-before)
	}
}

// TestCopyAtomicFailure: a reader error or a cancelled context leaves nothing at the path.
func TestCopyAtomicFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	boom := errors.New("boom")
	src := io.MultiReader(bytes.NewReader(make([]byte, copyChunk+5)), &failReader{boom})
	if _, err := CopyAtomic(context.Background(), path, 0o644, src, nil); !errors.Is(err, boom) {
		t.Fatalf("copy with a failing reader: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CopyAtomic(ctx, path, 0o644, bytes.NewReader(make([]byte, 10)), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled copy: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

type failReader struct{ err error }

func (r *failReader) Read([]byte) (int, error) { return 0, r.err }

func umask() os.FileMode {
	f, err := os.CreateTemp("", "umask")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	f.Close()
	os.Chmod(f.Name(), 0o777) // chmod ignores the umask; create it again with 0777 to see it
	os.Remove(f.Name())
	g, err := os.OpenFile(f.Name(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o777)
	if err != nil {
		return 0
	}
	g.Close()
	fi, _ := os.Stat(f.Name())
	return 0o777 &^ fi.Mode().Perm()
}

// TestCopyAtomicBuffered: with direct writes off (PDQ_DIRECT_IO=0) nothing is written directly
// and the copy is the same.
func TestCopyAtomicBuffered(t *testing.T) {
	noDirect = true
	defer func() { noDirect = false }()
	data := bytes.Repeat([]byte("pdq"), copyChunk)
	path := filepath.Join(t.TempDir(), "out")
	before := directBytes.Load()
	if _, err := CopyAtomic(context.Background(), path, 0o644, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	if back, _ := os.ReadFile(path); !bytes.Equal(back, data) {
		t.Fatal("buffered copy differs")
	}
	if n := directBytes.Load() - before; n != 0 {
		t.Fatalf("%d bytes written directly with direct I/O off", n)
	}
}
