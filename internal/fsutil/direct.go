package fsutil

import (
	"os"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DirectFile writes a file two ways: the block-aligned middle of a large write around the page
// cache (Linux O_DIRECT), the rest through it. Output written once and not read again during
// the run then neither evicts the source the run is reading nor costs the kernel fresh cache
// pages to fill (on a virtual machine the host hands those back a fault at a time: copying into
// them was a conversion's largest system cost). A middle whose buffer is aligned like its file
// offset (AlignedLike) goes out from the buffer itself; any other is first copied into a staging
// buffer of this process, which costs far less than the copy into fresh cache pages it
// replaces. Where the file system refuses direct writes, where they would gain nothing (tmpfs
// serves them from its cache pages), or with PDQ_DIRECT_IO=0, everything goes through the cache.
// Its methods may be called from several goroutines at once; the caller keeps their ranges
// apart.
type DirectFile struct {
	f       *os.File     // the file
	d       directWriter // the same file opened for direct writes, or nil
	refused atomic.Bool
}

// directWriter is what DirectFile needs of its direct descriptor (an *os.File opened with
// O_DIRECT; tests give one that refuses).
type directWriter interface {
	WriteAt(b []byte, off int64) (int, error)
	Close() error
}

// directMin is the smallest middle written directly: below it the device's latency for a
// synchronous write costs more than the cache saves.
const directMin = 128 << 10

// stageSize is the size of a staging buffer: unaligned middles go out this much at a time.
const stageSize = 2 << 20

// NewDirectFile returns a DirectFile writing f, which was opened as name: with direct writes
// when the file system takes them and name still leads to f's file.
func NewDirectFile(name string, f *os.File) *DirectFile {
	x := &DirectFile{f: f}
	if !noDirect && !cacheBacked(f) {
		if d := openDirect(name, f); d != nil { // not a nil *os.File in the interface
			x.d = d
		}
	}
	return x
}

// goesDirect reports whether an aligned middle of n bytes is written directly, and if not counts
// it against the process's cache budget.
func (x *DirectFile) goesDirect(n int64) bool {
	if x.d == nil || n < directMin || x.refused.Load() {
		return false
	}
	return cachedWrites.Add(n) > cacheBudget
}

// cacheBudget is how many bytes of large writes a process puts through the page cache before
// it writes them directly. A small conversion's output stays in the cache, where it costs least
// and where a verify run finds it; past this, writes through the cache cost ever more (4 GiB of
// dd: 0.13 ns of system time per byte directly, 0.25 ns per byte through the cache for the first
// 512 MiB, 1.4 ns for 2 GiB, reclaim and throttling past that on a virtual machine whose host
// takes its free pages back), and they evict the source the conversion is reading.
// PDQ_DIRECT_IO=1 sets it to zero.
var cacheBudget int64 = 1 << 30

// cachedWrites counts the bytes of large writes that went through the cache so far.
var cachedWrites atomic.Int64

// WriteAt writes b at off and returns how many of its bytes went through the page cache.
func (x *DirectFile) WriteAt(b []byte, off int64) (cached int, err error) {
	lo, hi := middle(off, len(b))
	if !x.goesDirect(hi - lo) {
		_, err := x.f.WriteAt(b, off)
		return len(b), err
	}
	cached, err = x.direct(b[lo-off:hi-off], lo)
	if err != nil {
		return cached, err
	}
	edges, err := x.writeEdges(b, off, lo, hi)
	if err != nil {
		return cached, err
	}
	return cached + edges, nil
}

// writeEdges writes the parts of b (at off) before lo and from hi on through the cache and
// returns their length.
func (x *DirectFile) writeEdges(b []byte, off, lo, hi int64) (int, error) {
	n := int(lo-off) + len(b) - int(hi-off)
	if _, err := x.f.WriteAt(b[:lo-off], off); err != nil {
		return n, err
	}
	_, err := x.f.WriteAt(b[hi-off:], hi)
	return n, err
}

// middle returns the block-aligned middle [lo, hi) of n bytes at off (hi < lo when there is
// none).
func middle(off int64, n int) (lo, hi int64) {
	return (off + directAlign - 1) &^ (directAlign - 1), (off + int64(n)) &^ (directAlign - 1)
}

// direct writes b (a multiple of the block size long) at the aligned offset off directly: from
// b itself when its address is aligned, else through a staging buffer. Refused, it writes the
// rest through the cache, as every later write of the file, and returns how much that was.
func (x *DirectFile) direct(b []byte, off int64) (cached int, err error) {
	if addrOf(b)%directAlign == 0 {
		k, err := x.d.WriteAt(b, off)
		directBytes.Add(int64(k))
		return x.refusedRest(err, b[k:], off+int64(k))
	}
	sp := getStage()
	defer func() { stagePool <- sp }()
	for len(b) > 0 {
		n := copy(*sp, b)
		k, err := x.d.WriteAt((*sp)[:n], off)
		directBytes.Add(int64(k))
		if err != nil {
			return x.refusedRest(err, b[k:], off+int64(k))
		}
		b, off = b[n:], off+int64(n)
	}
	return 0, nil
}

// refusedRest handles the outcome of a direct write that stopped before rest: a refusal
// writes rest through the cache (and turns direct writes off for the file); any other error
// is returned.
func (x *DirectFile) refusedRest(err error, rest []byte, off int64) (int, error) {
	if err == nil {
		return 0, nil
	}
	if !directRefused(err) {
		return 0, err
	}
	x.refused.Store(true) // x.d stays open for writes of other goroutines in flight; Close closes it
	_, err = x.f.WriteAt(rest, off)
	return len(rest), err
}

// WriteAtAsync is WriteAt returning as soon as b may be reused: the middle that goes out
// directly is copied into staging buffers and written by background writers, so that the
// caller computes while the device writes (a direct write waits for the device, which a write
// into the page cache does not). done is called once every byte of b is written, with how many
// went through the cache and the first error, from the caller's goroutine when nothing was left
// to the background, else from a writer's. At most stagesInFlight staging buffers are in
// flight in the process: beyond them the caller waits for one, which bounds the memory and
// gives the device's pace to whoever writes faster than it.
func (x *DirectFile) WriteAtAsync(b []byte, off int64, done func(cached int, err error)) {
	lo, hi := middle(off, len(b))
	if !x.goesDirect(hi - lo) { // counted against the budget once: not through WriteAt
		_, err := x.f.WriteAt(b, off)
		done(len(b), err)
		return
	}
	edges, err := x.writeEdges(b, off, lo, hi)
	if err != nil {
		done(edges, err)
		return
	}
	j := &asyncWrite{x: x, cached: edges, done: done}
	mid := b[lo-off : hi-off]
	j.pending.Store(int32((len(mid) + stageSize - 1) / stageSize))
	startWriters.Do(func() {
		for range directWriters {
			go writeStaged()
		}
	})
	for len(mid) > 0 {
		sp := getStage()
		n := copy(*sp, mid)
		staged <- stagedWrite{j: j, buf: sp, n: n, off: lo}
		mid, lo = mid[n:], lo+int64(n)
	}
}

// asyncWrite is one WriteAtAsync call whose staged pieces are in flight.
type asyncWrite struct {
	x       *DirectFile
	pending atomic.Int32 // staged pieces not yet written
	mu      sync.Mutex
	cached  int
	err     error
	done    func(cached int, err error)
}

// finish records one staged piece written (cached bytes of it through the cache, or err).
func (j *asyncWrite) finish(cached int, err error) {
	j.mu.Lock()
	j.cached += cached
	if j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
	if j.pending.Add(-1) == 0 {
		j.done(j.cached, j.err)
	}
}

// stagedWrite is a piece of an asyncWrite: n bytes of buf, for file offset off.
type stagedWrite struct {
	j   *asyncWrite
	buf *[]byte
	n   int
	off int64
}

// directWriters is the number of background writers, and so of direct writes in flight at
// once: enough to keep a device's queue busy.
const directWriters = 4

// stagesInFlight bounds the staging buffers of WriteAtAsync (stageSize each).
const stagesInFlight = 16

var (
	startWriters sync.Once
	staged       = make(chan stagedWrite)
	stagePool    = make(chan *[]byte, stagesInFlight)
	stagesMade   atomic.Int32
)

// getStage returns a free staging buffer: a new one while fewer than stagesInFlight exist, else
// the next one freed.
func getStage() *[]byte {
	select {
	case sp := <-stagePool:
		return sp
	default:
	}
	if stagesMade.Add(1) <= stagesInFlight {
		b := AlignedLike(make([]byte, stageSize+DirectAlign), 0, stageSize)
		return &b
	}
	stagesMade.Add(-1)
	return <-stagePool
}

// writeStaged is a background writer: it writes staged pieces directly (through the cache once
// the file has refused a direct write) and frees their buffers.
func writeStaged() {
	for w := range staged {
		x, b := w.j.x, (*w.buf)[:w.n]
		cached := 0
		var err error
		if x.refused.Load() {
			_, err = x.f.WriteAt(b, w.off)
			cached = len(b)
		} else {
			var k int
			k, err = x.d.WriteAt(b, w.off)
			directBytes.Add(int64(k))
			cached, err = x.refusedRest(err, b[k:], w.off+int64(k))
		}
		stagePool <- w.buf
		w.j.finish(cached, err)
	}
}

// Close closes the direct descriptor; the caller closes the file itself, and must not close
// either while writes are in flight.
func (x *DirectFile) Close() error {
	if x.d == nil {
		return nil
	}
	return x.d.Close()
}

// openDirect opens the file f was created as a second time for direct writes, or returns nil
// (the file system refuses O_DIRECT, or the name no longer leads to f's file).
func openDirect(name string, f *os.File) *os.File {
	d, err := openDirectFile(name)
	if err != nil {
		return nil
	}
	a, errA := f.Stat()
	b, errB := d.Stat()
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		d.Close()
		return nil
	}
	return d
}

// DirectAlign is the alignment of offsets, lengths and buffer addresses direct writes get (the
// largest logical block size in common use).
const DirectAlign = 4096

const directAlign = DirectAlign

// AlignedLike returns n bytes of raw starting at an address congruent to off modulo DirectAlign,
// so that the block-aligned middle of a piece written at off can go out directly; raw must hold
// n+DirectAlign bytes.
func AlignedLike(raw []byte, off int64, n int) []byte {
	shift := int((uintptr(off) - addrOf(raw)) % directAlign)
	return raw[shift : shift+n]
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// noDirect turns direct writes off (PDQ_DIRECT_IO=0): for file systems where O_DIRECT is
// accepted but slow, such as some network mounts.
var noDirect = os.Getenv("PDQ_DIRECT_IO") == "0"

func init() {
	if os.Getenv("PDQ_DIRECT_IO") == "1" {
		cacheBudget = 0
	}
}

// directBytes counts the bytes written directly (tests look at it).
var directBytes atomic.Int64

// DirectBytes returns how many bytes the process has written with direct I/O so far: a test
// that means to exercise direct writes checks that some happened.
func DirectBytes() int64 { return directBytes.Load() }
