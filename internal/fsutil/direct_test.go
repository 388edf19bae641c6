package fsutil

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// setCacheBudget sets the process's cache budget for large writes (none written yet) and
// returns a function restoring it.
func setCacheBudget(n int64) (restore func()) {
	old, used := cacheBudget, cachedWrites.Load()
	cacheBudget = n
	cachedWrites.Store(0)
	return func() { cacheBudget = old; cachedWrites.Store(used) }
}

// newDirectFile creates the file at path and returns a DirectFile of it, both closed when the
// test ends.
func newDirectFile(t *testing.T, path string) *DirectFile {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	x := NewDirectFile(f.Name(), f)
	t.Cleanup(func() { x.Close(); f.Close() })
	return x
}

// randomBytes returns n bytes from rng.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// directTaken reports whether dir's file system takes direct writes that gain something (not
// tmpfs): a probe file written through a DirectFile.
func directTaken(t *testing.T, dir string) bool {
	x := newDirectFile(t, filepath.Join(dir, "probe"))
	before := directBytes.Load()
	if _, err := x.WriteAt(make([]byte, 2*directMin), 0); err != nil {
		t.Fatal(err)
	}
	return directBytes.Load() > before
}

// TestDirectFile: a file written through a DirectFile in random pieces (small and large, from
// buffers aligned like their offsets and not, several goroutines at once, waiting for the
// writes or not) reads back intact;
// every byte is counted once, as cached or as written directly; where the file system takes
// direct writes, large pieces go out directly, staged or not, and on tmpfs none does.
func TestDirectFile(t *testing.T) {
	defer setCacheBudget(0)()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dir := range testDirs(t) {
		taken := directTaken(t, dir)
		t.Logf("%s: direct writes taken: %v", dir, taken)
		const size = 9<<20 + 4321
		data := randomBytes(rng, size)
		var cuts []int
		for pos := 0; pos < size; {
			cuts = append(cuts, pos)
			step := 1 + rng.IntN(8<<10)
			if rng.IntN(2) == 0 {
				step = directMin + rng.IntN(2<<20)
			}
			pos += step
		}
		cuts = append(cuts, size)
		f, err := os.Create(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		x := NewDirectFile(f.Name(), f)
		before := directBytes.Load()
		var mu sync.Mutex
		var cached int
		var wg, async sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := w; i+1 < len(cuts); i += 3 {
					lo, hi := cuts[i], cuts[i+1]
					buf := make([]byte, hi-lo+DirectAlign)[1 : 1+hi-lo] // misaligned: staged
					if i%2 == 0 {
						buf = AlignedLike(make([]byte, hi-lo+DirectAlign), int64(lo), hi-lo)
					}
					copy(buf, data[lo:hi])
					add := func(c int, err error) {
						if err != nil {
							t.Error(err)
						}
						mu.Lock()
						cached += c
						mu.Unlock()
					}
					if i%4 < 2 {
						add(x.WriteAt(buf, int64(lo)))
						continue
					}
					async.Add(1)
					x.WriteAtAsync(buf, int64(lo), func(c int, err error) { add(c, err); async.Done() })
					clear(buf) // the bytes were staged or written: the buffer is the caller's again
				}
			})
		}
		wg.Wait()
		async.Wait()
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		back, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("%s: %d bytes in %d pieces read back differ (%v)", dir, size, len(cuts)-1, err)
		}
		direct := int(directBytes.Load() - before)
		if cached+direct != size {
			t.Errorf("%s: %d bytes cached and %d direct, want %d in all", dir, cached, direct, size)
		}
		if taken && direct < size/2 || !taken && direct != 0 {
			t.Errorf("%s: %d of %d bytes written directly (direct writes taken: %v)", dir, direct, size, taken)
		}
	}
}

// TestDirectFileBudget: large writes go through the cache until the process has put its
// budget through it, then directly; small ones always through the cache; WriteAtAsync too,
// counting what it puts through the cache once.
func TestDirectFileBudget(t *testing.T) {
	dir := t.TempDir()
	if !func() bool { defer setCacheBudget(0)(); return directTaken(t, dir) }() {
		t.Skipf("%s takes no direct writes", dir)
	}
	defer setCacheBudget(3 * directMin)()
	x := newDirectFile(t, filepath.Join(dir, "out"))
	var err error
	buf := AlignedLike(make([]byte, 8*directMin+DirectAlign), 0, 8*directMin)
	for i, c := range []struct {
		n, direct int
		async     bool
	}{
		{directMin, 0, true}, {directMin - DirectAlign, 0, false}, {2 * directMin, 0, false}, // 3·directMin cached
		{directMin, directMin, false}, {10, 0, false}, {4 * directMin, 4 * directMin, true},
	} {
		before := directBytes.Load()
		off := int64(i) * 8 * directMin
		if c.async {
			done := make(chan error, 1) // done may run before WriteAtAsync returns
			x.WriteAtAsync(buf[:c.n], off, func(_ int, err error) { done <- err })
			err = <-done
		} else {
			_, err = x.WriteAt(buf[:c.n], off)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := directBytes.Load() - before; got != int64(c.direct) {
			t.Errorf("write %d of %d bytes: %d written directly, want %d", i, c.n, got, c.direct)
		}
	}
}

// TestDirectFileOff: with direct writes off (PDQ_DIRECT_IO=0) every byte goes through the
// cache.
func TestDirectFileOff(t *testing.T) {
	noDirect = true
	defer func() { noDirect = false }()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x := NewDirectFile(f.Name(), f)
	defer x.Close()
	before := directBytes.Load()
	data := bytes.Repeat([]byte("pdq"), 1<<20)
	if c, err := x.WriteAt(AlignedLike(append(make([]byte, DirectAlign), data...), 0, len(data)), 0); err != nil || c != len(data) {
		t.Fatalf("cached %d of %d bytes (%v)", c, len(data), err)
	}
	if n := directBytes.Load() - before; n != 0 {
		t.Fatalf("%d bytes written directly with direct I/O off", n)
	}
}
