package fsutil

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"pdq/internal/testfs"
)

// TestClonePieces: on XFS a clone takes no writes, shares every block with its source, checks
// its pieces as a written copy does, ends with the source's checksum, and stays as it was when
// the source is written afterwards (a copy, not a link).
func TestClonePieces(t *testing.T) {
	dir := testfs.XFS(t, 0)
	rng := rand.New(rand.NewPCG(5, 6))
	want := make([]byte, 3<<20+123)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "out", "dst")
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	sf := openFile(t, src)
	p, err := ClonePieces(dst, 0o644, sf, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Cloned() {
		t.Fatal("ClonePieces returned a file it did not clone")
	}
	cuts := []int{0, 4096, 5000, 1 << 20, 2<<20 + 7, len(want)}
	for _, k := range []int{3, 0, 4, 1, 2} {
		if err := p.WriteAt(bytes.Clone(want[cuts[k]:cuts[k+1]]), int64(cuts[k])); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WriteAt(want[10:20], 10); !errors.Is(err, ErrPieces) {
		t.Fatalf("a piece over one taken before: %v, want ErrPieces", err)
	}
	p2, err := ClonePieces(dst+"2", 0o644, sf, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.WriteAt(want[:4096], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Commit(); !errors.Is(err, ErrPieces) {
		t.Fatalf("a clone whose pieces miss bytes committed: %v", err)
	}
	if _, err := os.Lstat(dst + "2"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused clone appeared at its path: %v", err)
	}
	if _, err := p.Commit(); !errors.Is(err, ErrPieces) {
		t.Fatalf("the file's first error (the overlap) not returned by Commit: %v", err)
	}

	p, err = ClonePieces(dst, 0o644, sf, int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	for k := range len(cuts) - 1 {
		if err := p.WriteAt(want[cuts[k]:cuts[k+1]], int64(cuts[k])); err != nil {
			t.Fatal(err)
		}
	}
	crc, err := p.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if w := UpdateCRC32C(0, want); crc != w {
		t.Errorf("checksum %08x, want the source's %08x", crc, w)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the clone's bytes differ from its source's")
	}
	if n := testfs.SharedBytes(t, dst); n < int64(len(want))&^4095 {
		t.Errorf("%d of %d bytes shared with the source", n, len(want))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 8192), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatal("writing the source changed its clone")
	}
}

// TestClonePiecesRefused: where no clone can be made (this machine's temporary directory, a
// tmpfs) ClonePieces says ErrNotCloned, and of a source of another size than expected it says
// ErrPieces; either way it leaves nothing.
func TestClonePiecesRefused(t *testing.T) {
	check := func(t *testing.T, dir string, size int64, want error) {
		t.Helper()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		if err := os.WriteFile(src, make([]byte, 10000), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := ClonePieces(dst, 0o644, openFile(t, src), size)
		if err == nil {
			p.Abort()
			if size == 10000 {
				t.Skipf("%s clones files", dir)
			}
			t.Fatal("ClonePieces of a source of the wrong size succeeded")
		}
		if !errors.Is(err, want) {
			t.Fatalf("%v, want %v", err, want)
		}
		if errors.Is(err, ErrNotCloned) != (want == ErrNotCloned) {
			t.Fatalf("%v: ErrNotCloned (the copy would be written) %v", err, want == ErrNotCloned)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("left behind: %v", ents)
		}
	}
	t.Run("plain", func(t *testing.T) { check(t, t.TempDir(), 10000, ErrNotCloned) })
	t.Run("tmpfs", func(t *testing.T) { check(t, testfs.Tmpfs(t, "1m"), 10000, ErrNotCloned) })
	t.Run("size", func(t *testing.T) { check(t, testfs.XFS(t, 0), 9999, ErrPieces) })
}

// openFile opens path for reading until the test ends.
func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
