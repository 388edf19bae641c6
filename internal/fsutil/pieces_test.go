package fsutil

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestPieceFile: a file written in random pieces, in random order from several goroutines,
// from buffers aligned like their offsets or not, arrives intact with the checksum of its bytes;
// on ext4 the aligned middles go out directly, on tmpfs through the cache.
func TestPieceFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dir := range testDirs(t) {
		before := directBytes.Load()
		for _, size := range []int{0, 1, 4095, 4096, 3<<20 + 777} {
			data := randomBytes(rng, size)
			var cuts []int
			for pos := 0; pos < size; {
				cuts = append(cuts, pos)
				pos += 1 + rng.IntN(max(1, size/5))
			}
			cuts = append(cuts, size)
			order := rng.Perm(len(cuts) - 1)
			path := filepath.Join(dir, "out")
			p, err := CreatePieces(path, 0o640, int64(size))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Go(func() {
					for k, i := range order {
						if k%3 != w {
							continue
						}
						lo, hi := cuts[i], cuts[i+1]
						buf := data[lo:hi]
						if i%2 == 0 { // a buffer aligned like its offset, as convert's slab buffers are
							buf = AlignedLike(make([]byte, hi-lo+DirectAlign), int64(lo), hi-lo)
							copy(buf, data[lo:hi])
						}
						if err := p.WriteAt(buf, int64(lo)); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if g := p.Gaps(); len(g) != 0 {
				t.Fatalf("%s: %d bytes: gaps %v after every piece", dir, size, g)
			}
			crc, err := p.Commit()
			if err != nil {
				t.Fatal(err)
			}
			back, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("%s: %d bytes written in %d pieces, read back differ (%v)", dir, size, len(order), err)
			}
			if crc != crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatalf("%s: checksum of %d bytes wrong", dir, size)
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

// TestPieceFileRefuses: overlapping or outside pieces, and a commit with bytes missing, are
// errors that leave nothing at the path; Abort removes the temporary file.
func TestPieceFileRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	for _, c := range []struct {
		name  string
		write func(p *PieceFile) error
	}{
		{"overlap", func(p *PieceFile) error {
			if err := p.WriteAt(make([]byte, 10), 0); err != nil {
				return nil // the first write must succeed
			}
			return p.WriteAt(make([]byte, 10), 5)
		}},
		{"outside", func(p *PieceFile) error { return p.WriteAt(make([]byte, 10), 95) }},
		{"negative", func(p *PieceFile) error { return p.WriteAt(make([]byte, 1), -1) }},
		{"missing", func(p *PieceFile) error {
			if err := p.WriteAt(make([]byte, 60), 0); err != nil {
				return nil
			}
			_, err := p.Commit()
			return err
		}},
	} {
		p, err := CreatePieces(path, 0o644, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.write(p); !errors.Is(err, ErrPieces) {
			t.Errorf("%s: %v, want ErrPieces", c.name, err)
		}
		if _, err := p.Commit(); err == nil {
			t.Errorf("%s: commit after a refused piece succeeded", c.name)
		}
		p.Abort()
		for _, name := range []string{path, PartialName(path)} {
			if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s left: %v", c.name, name, err)
			}
		}
	}
	p, err := CreatePieces(path, 0o644, 100)
	if err != nil {
		t.Fatal(err)
	}
	p.WriteAt(make([]byte, 100), 0)
	p.Abort()
	if _, err := os.Stat(PartialName(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("abort left the temporary file: %v", err)
	}
	if err := p.WriteAt([]byte{1}, 0); err == nil {
		t.Error("write after abort succeeded")
	}
}

// TestPieceFileBuffered: with direct writes off (PDQ_DIRECT_IO=0) nothing is written directly
// and the file is the same.
func TestPieceFileBuffered(t *testing.T) {
	noDirect = true
	defer func() { noDirect = false }()
	data := bytes.Repeat([]byte("pdq"), 1<<20)
	path := filepath.Join(t.TempDir(), "out")
	before := directBytes.Load()
	p, err := CreatePieces(path, 0o644, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	buf := AlignedLike(make([]byte, len(data)+DirectAlign), 0, len(data))
	copy(buf, data)
	if err := p.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if back, _ := os.ReadFile(path); !bytes.Equal(back, data) {
		t.Fatal("buffered pieces differ")
	}
	if n := directBytes.Load() - before; n != 0 {
		t.Fatalf("%d bytes written directly with direct I/O off", n)
	}
}

func umask() os.FileMode {
	f, err := os.CreateTemp("", "umask")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	f.Close()
	os.Remove(f.Name())
	g, err := os.OpenFile(f.Name(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o777)
	if err != nil {
		return 0
	}
	g.Close()
	fi, _ := os.Stat(f.Name())
	return 0o777 &^ fi.Mode().Perm()
}

// testDirs returns a temporary directory on the test's file system and, where there is one, one
// on tmpfs (direct I/O refused or emulated: either way the bytes must arrive).
func testDirs(t *testing.T) []string {
	dirs := []string{t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "pdq-copy-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, d)
		}
	}
	return dirs
}
