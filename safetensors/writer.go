package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"pdq/internal/fsutil"
)

// Writer writes one safetensors file whose Layout was computed up front. Tensors may be written in
// any order, whole or in chunks, from several goroutines at once: each write is a positioned write
// at the offset the layout gives. The file is built under a temporary name in the destination
// directory and appears at its path only when Close has checked that every byte of every tensor was
// written exactly once. The first error is kept: after it, every call and Close return it and Close
// removes the temporary file. Writes go through a fsutil.DirectFile: the block-aligned middle of a
// large one goes around the page cache where the file system takes direct I/O, in the background.
type Writer struct {
	path, temp string
	layout     *Layout
	index      map[string]int // name -> position in layout.Tensors
	f          *os.File
	out        *fsutil.DirectFile // writes f, large tensors' aligned middles around the page cache

	mu       sync.Mutex
	covered  []fsutil.Coverage // per tensor: the ranges written, relative to its start, with their checksums
	err      error             // first error
	done     bool              // Close or Abort has begun
	inflight sync.WaitGroup
	sum      uint32       // CRC-32C of the whole file, set by a successful Close
	unsynced atomic.Int64 // bytes written since write-back was last started
}

// writeBackEvery is how many bytes a Writer lets pile up in the page cache before it has the
// kernel start writing them to the device (fsutil.StartWriteBack): without it a shard's bytes
// all reach the device during Close's sync, and a conversion waits for the whole shard at its
// end; with it they go out while the rest is computed.
const writeBackEvery = 32 << 20

// Create starts writing the file described by layout at path. The data goes to TempPath
// (".NAME.partial" in the same directory, replaced if it exists), which gets the header at once and
// is sized to layout.FileSize. Create refuses a layout whose Prefix does not parse or does not match
// its Tensors and FileSize. The layout must not be modified while the writer is in use.
func Create(path string, layout *Layout) (*Writer, error) {
	if err := checkLayout(layout); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	// Created fresh: whatever lies under the temporary name (a crashed run's file, or a link
	// planted there) is removed, never written through.
	temp, f, err := fsutil.CreatePartial(path, os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	w := newWriter(path, temp, layout, f)
	_, err = f.WriteAt(layout.Prefix, 0)
	if err == nil {
		err = fsutil.Preallocate(f, layout.FileSize)
	}
	if err != nil { // both name the file
		w.out.Close()
		f.Close()
		os.Remove(temp)
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return w, nil
}

// newWriter is a Writer of layout into the open temporary file f, nothing written yet.
func newWriter(path, temp string, layout *Layout, f *os.File) *Writer {
	w := &Writer{path: path, temp: temp, layout: layout, f: f, out: fsutil.NewDirectFile(temp, f), covered: make([]fsutil.Coverage, len(layout.Tensors)),
		index: make(map[string]int, len(layout.Tensors))}
	for i := range layout.Tensors {
		w.index[layout.Tensors[i].Name] = i
	}
	return w
}

// checkLayout verifies that a layout is self-consistent: the prefix length, the header JSON (parsed
// by the reader's own code) against Tensors, and FileSize.
func checkLayout(l *Layout) error {
	if l == nil {
		return fmt.Errorf("%w: nil layout", ErrWriteMismatch)
	}
	if len(l.Prefix) < 8 || len(l.Prefix)%8 != 0 {
		return fmt.Errorf("%w: prefix of %d bytes", ErrWriteMismatch, len(l.Prefix))
	}
	if n := binary.LittleEndian.Uint64(l.Prefix); n != uint64(len(l.Prefix)-8) {
		return fmt.Errorf("%w: prefix declares %d header bytes, has %d", ErrWriteMismatch, n, len(l.Prefix)-8)
	}
	buf := l.FileSize - int64(len(l.Prefix))
	h, err := parseHeaderJSON(l.Prefix[8:], buf, "")
	if err != nil {
		return fmt.Errorf("%w: header does not validate: %w", ErrWriteMismatch, err)
	}
	if len(h.Tensors) != len(l.Tensors) {
		return fmt.Errorf("%w: header has %d tensors, layout %d", ErrWriteMismatch, len(h.Tensors), len(l.Tensors))
	}
	byName := make(map[string]*TensorInfo, len(h.Tensors))
	for i := range h.Tensors {
		byName[h.Tensors[i].Name] = &h.Tensors[i]
	}
	for i := range l.Tensors {
		t := &l.Tensors[i]
		p := byName[t.Name]
		if p == nil || p.DType != t.DType || p.DataOffsets != t.DataOffsets || !slices.Equal(p.Shape, t.Shape) {
			return fmt.Errorf("%w: tensor %q differs between header and layout", ErrWriteMismatch, t.Name)
		}
		delete(byName, t.Name) // a name listed twice in Tensors is then missing the second time
	}
	return nil
}

// TempPath returns the temporary file the data is written to until Close.
func (w *Writer) TempPath() string { return w.temp }

// WriteTensor writes the whole of the named tensor; len(data) must be its byte size.
func (w *Writer) WriteTensor(name string, data []byte) error {
	if i, ok := w.index[name]; ok && int64(len(data)) != w.layout.Tensors[i].ByteSize() {
		return w.fail(fmt.Errorf("safetensors: %s: tensor %q: %w: %d bytes, want %d",
			w.path, name, ErrWriteMismatch, len(data), w.layout.Tensors[i].ByteSize()))
	}
	return w.WriteTensorAt(name, 0, data)
}

// WriteTensorAt writes data at offset off from the start of the named tensor. The range must lie
// inside the tensor and not overlap anything written before (ErrWriteMismatch otherwise). It may be
// called from several goroutines at once. It returns once data may be reused: the part written
// directly may still be on its way to the device (fsutil.DirectFile.WriteAtAsync), and an error
// there is returned by a later call and by Close, which waits for every write.
func (w *Writer) WriteTensorAt(name string, off int64, data []byte) error {
	abs, err := w.reserve(name, off, int64(len(data)), fsutil.UpdateCRC32C(0, data))
	if err != nil || len(data) == 0 {
		return err
	}
	w.out.WriteAtAsync(data, abs, func(cached int, err error) {
		defer w.inflight.Done()
		if err != nil {
			w.fail(fmt.Errorf("safetensors: %s: tensor %q: %w", w.temp, name, err))
			return
		}
		if w.unsynced.Add(int64(cached)) >= writeBackEvery {
			w.unsynced.Store(0)
			fsutil.StartWriteBack(w.f)
		}
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err // this write's error when it failed before returning, or an earlier one's
}

// reserve checks a write and records its range as covered. For a non-empty write it returns the
// absolute file offset with w.inflight incremented; the caller must call w.inflight.Done.
func (w *Writer) reserve(name string, off, n int64, crc uint32) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, fmt.Errorf("safetensors: %s: tensor %q: write after close: %w", w.path, name, ErrClosed)
	}
	i, ok := w.index[name]
	if !ok {
		return 0, w.failLocked(fmt.Errorf("safetensors: %s: tensor %q: %w: not in the layout", w.path, name, ErrWriteMismatch))
	}
	t := &w.layout.Tensors[i]
	size := t.ByteSize()
	if off < 0 || n > size || off > size-n {
		return 0, w.failLocked(fmt.Errorf("safetensors: %s: tensor %q: %w: bytes [%d, %d) outside [0, %d)",
			w.path, name, ErrWriteMismatch, off, off+n, size))
	}
	if n == 0 {
		return 0, nil
	}
	if hit, ok := w.covered[i].Add(off, n, crc); !ok {
		return 0, w.failLocked(fmt.Errorf("safetensors: %s: tensor %q: %w: bytes [%d, %d) overlap bytes [%d, %d) already written",
			w.path, name, ErrWriteMismatch, off, off+n, hit.Lo, hit.Hi))
	}
	w.inflight.Add(1)
	return w.layout.DataStart() + t.DataOffsets[0] + off, nil
}

// TensorCRC32C returns the CRC-32C of tensor name's bytes, and true, once every byte of it has
// been written (a tensor without bytes has checksum 0). The checksum is of the bytes handed to
// the writer, taken as they were written: nothing is read back.
func (w *Writer) TensorCRC32C(name string) (uint32, bool) {
	i, ok := w.index[name]
	if !ok {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tensorCRCLocked(i)
}

func (w *Writer) tensorCRCLocked(i int) (uint32, bool) {
	return w.covered[i].Whole(w.layout.Tensors[i].ByteSize())
}

// fileCRC is the CRC-32C of the whole file: the prefix, then each tensor's bytes in file order,
// zeros where the layout leaves a gap. Every tensor must be written completely.
func (w *Writer) fileCRC() uint32 {
	order := make([]int, len(w.layout.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmpInt64(w.layout.Tensors[a].DataOffsets[0], w.layout.Tensors[b].DataOffsets[0])
	})
	crc := fsutil.UpdateCRC32C(0, w.layout.Prefix)
	pos := int64(len(w.layout.Prefix))
	for _, i := range order {
		t := &w.layout.Tensors[i]
		start := w.layout.DataStart() + t.DataOffsets[0]
		crc = fsutil.ZerosCRC32C(crc, start-pos)
		c, _ := w.tensorCRCLocked(i)
		crc = fsutil.CombineCRC32C(crc, c, t.ByteSize())
		pos = max(pos, start+t.ByteSize())
	}
	return fsutil.ZerosCRC32C(crc, w.layout.FileSize-pos)
}

// CRC32C returns the CRC-32C of the file Close wrote (zero before a successful Close), computed
// from the bytes as they were written, without reading the file back.
func (w *Writer) CRC32C() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sum
}

// fail records err as the writer's error unless one is already kept, and returns the kept error.
func (w *Writer) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failLocked(err)
}

func (w *Writer) failLocked(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Close waits for writes in progress, checks that every tensor was written completely, then
// syncs the file, renames it to its path and syncs the directory. On any failure (including
// ErrWriteMismatch for bytes never written) the temporary file is removed and nothing appears at
// the path.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return fmt.Errorf("safetensors: %s: %w", w.path, ErrClosed)
	}
	w.done = true
	w.mu.Unlock()
	w.inflight.Wait()

	err := w.err
	if err == nil {
		err = w.checkCoverage()
	}
	var sum uint32
	if err == nil {
		sum = w.fileCRC()
		err = w.f.Sync()
	}
	w.out.Close()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err = fsutil.FinishPartial(w.temp, w.path, err); err != nil {
		if w.err == nil {
			w.err = err
		}
		return err
	}
	w.mu.Lock()
	w.sum = sum
	w.mu.Unlock()
	return nil
}

// checkCoverage reports the first tensor, in layout order, not written completely.
func (w *Writer) checkCoverage() error {
	for i := range w.layout.Tensors {
		t := &w.layout.Tensors[i]
		size := t.ByteSize()
		gaps := w.covered[i].Gaps(size)
		if len(gaps) == 0 {
			continue
		}
		lo, hi := gaps[0].Lo, gaps[0].Hi // the first missing range
		return fmt.Errorf("safetensors: %s: tensor %q: %w: bytes [%d, %d) of %d never written",
			w.path, t.Name, ErrWriteMismatch, lo, hi, size)
	}
	return nil
}

// Abort stops writing and removes the temporary file. It is a no-op after a successful Close, so
// that `defer w.Abort()` is safe.
func (w *Writer) Abort() error {
	if !w.stop("aborted") {
		return nil
	}
	w.out.Close()
	w.f.Close()
	if err := os.Remove(w.temp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// stop ends writing (later calls fail with ErrClosed and why) and waits for writes in progress;
// it reports false when Close, Abort or Detach had already begun.
func (w *Writer) stop(why string) bool {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return false
	}
	w.done = true
	if w.err == nil {
		w.err = fmt.Errorf("safetensors: %s: %w: %s", w.path, ErrClosed, why)
	}
	w.mu.Unlock()
	w.inflight.Wait()
	return true
}
