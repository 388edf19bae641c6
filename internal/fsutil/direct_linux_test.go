package fsutil

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// refusingWriter is a direct descriptor whose file system takes the first take bytes of direct
// writes and then refuses them with err, as one that accepts O_DIRECT at open time but not for
// some writes does (EINVAL).
type refusingWriter struct {
	f     *os.File
	take  int64
	err   error
	mu    sync.Mutex
	calls int // write calls after the refusal
}

func (w *refusingWriter) WriteAt(b []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.take <= 0 {
		w.calls++
		return 0, w.err
	}
	n, err := w.f.WriteAt(b[:min(int64(len(b)), w.take)], off)
	w.take -= int64(n)
	if err == nil && n < len(b) {
		err = w.err // a partial write, then the refusal
	}
	return n, err
}

func (w *refusingWriter) Close() error { return nil }

// TestDirectFileRefused: when direct writes are refused part way through a file (EINVAL or
// EOPNOTSUPP, in the middle of a write), the rest of that write and every later one goes through
// the cache, whichever kind of write met the refusal: WriteAt from an aligned buffer, WriteAt
// staged, or a background writer of WriteAtAsync. The file reads back intact, each byte is
// counted once as cached or direct, and the refusing descriptor is never asked again.
func TestDirectFileRefused(t *testing.T) {
	defer setCacheBudget(0)()
	rng := rand.New(rand.NewPCG(9, 10))
	const take = 1<<20 + DirectAlign // refused inside the first 2 MiB
	for _, refusal := range []error{syscall.EINVAL, syscall.EOPNOTSUPP} {
		for _, first := range []string{"aligned", "staged", "async"} {
			path := filepath.Join(t.TempDir(), "out")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			w := &refusingWriter{f: g, take: take, err: refusal}
			x := &DirectFile{f: f, d: w}
			const size = 9<<20 + 777
			data := randomBytes(rng, size)
			before := directBytes.Load()
			cached := 0
			// write writes [lo, hi) the given way and waits for it.
			write := func(kind string, lo, hi int) {
				buf := AlignedLike(make([]byte, hi-lo+DirectAlign), int64(lo), hi-lo)
				if kind == "staged" {
					buf = make([]byte, hi-lo+DirectAlign)[1 : 1+hi-lo] // misaligned
				}
				copy(buf, data[lo:hi])
				if kind == "async" {
					done := make(chan error, 1)
					x.WriteAtAsync(buf, int64(lo), func(c int, err error) { cached += c; done <- err })
					err = <-done
				} else {
					var c int
					c, err = x.WriteAt(buf, int64(lo))
					cached += c
				}
				if err != nil {
					t.Fatalf("%v, %s first: %s write [%d, %d): %v", refusal, first, kind, lo, hi, err)
				}
			}
			write(first, 0, 2<<20) // one direct piece: refused in its middle
			if !x.refused.Load() || directBytes.Load()-before != take {
				t.Fatalf("%v, %s first: refused %v after %d direct bytes, want the refusal after %d",
					refusal, first, x.refused.Load(), directBytes.Load()-before, take)
			}
			kinds := []string{"aligned", "staged", "async"}
			for i, lo := 0, 2<<20; lo < size; i++ {
				hi := min(size, lo+directMin+rng.IntN(2<<20))
				write(kinds[i%3], lo, hi)
				lo = hi
			}
			f.Close()
			g.Close()
			back, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("%v, %s first: the file read back differs (%v)", refusal, first, err)
			}
			if direct := directBytes.Load() - before; direct != take || int64(cached)+direct != size {
				t.Errorf("%v, %s first: %d bytes direct and %d cached, want %d direct and %d in all", refusal, first, direct, cached, int64(take), size)
			}
			if w.calls != 0 {
				t.Errorf("%v, %s first: the refusing descriptor was asked %d more times", refusal, first, w.calls)
			}
		}
	}
}

// TestDirectFileError: an error other than a refusal (EIO) is the write's error, through
// WriteAt and through a background writer, and leaves direct writes on.
func TestDirectFileError(t *testing.T) {
	defer setCacheBudget(0)()
	f, err := os.Create(filepath.Join(t.TempDir(), "eio"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x := &DirectFile{f: f, d: &refusingWriter{f: f, err: syscall.EIO}}
	if _, err := x.WriteAt(AlignedLike(make([]byte, 2*directMin+DirectAlign), 0, 2*directMin), 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("direct write failing with EIO: %v, want EIO", err)
	}
	done := make(chan error, 1)
	x.WriteAtAsync(make([]byte, 2*directMin), 0, func(_ int, err error) { done <- err })
	if err := <-done; !errors.Is(err, syscall.EIO) {
		t.Errorf("background direct write failing with EIO: %v, want EIO", err)
	}
	if x.refused.Load() {
		t.Error("EIO turned direct writes off")
	}
}

// TestDirectFileOtherName: when the name no longer leads to the file (replaced after it was
// created), the DirectFile has no direct descriptor, and a large write goes through the cache.
func TestDirectFileOtherName(t *testing.T) {
	defer setCacheBudget(0)()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other := filepath.Join(dir, "b")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	x := NewDirectFile(other, f)
	defer x.Close()
	if x.d != nil {
		t.Fatalf("direct descriptor %v for a name that leads to another file", x.d)
	}
	data := randomBytes(rand.New(rand.NewPCG(3, 4)), 2*directMin)
	buf := AlignedLike(make([]byte, len(data)+DirectAlign), 0, len(data))
	copy(buf, data)
	if c, err := x.WriteAt(buf, 0); err != nil || c != len(data) {
		t.Fatalf("write: %d cached, %v", c, err)
	}
	if back, err := os.ReadFile(f.Name()); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back differs (%v)", err)
	}
}
