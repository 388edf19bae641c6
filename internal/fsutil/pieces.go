package fsutil

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// ErrPieces: a PieceFile was handed a piece outside the file or overlapping one written before,
// or committed with bytes never written.
var ErrPieces = errors.New("file pieces do not tile the file")

// PieceFile is a file of a known size written in pieces at their offsets, in any order (a copy
// fed from the buffers a reader already holds, instead of reading its source a second time).
// It is built under PartialName(path), created fresh, and appears at path only when Commit has
// checked that every byte was written exactly once. The CRC-32C of each piece is taken as it is
// written and the checksums combine (Coverage), so Commit knows the file's checksum without
// reading it back. Pieces are written through a DirectFile: where the file system takes direct
// I/O, the block-aligned middle of a large piece goes around the page cache, so that a copy of
// hundreds of gigabytes neither evicts what the rest of the run reads nor pays for cache pages
// it never reads again. Its methods may be called from several goroutines.
type PieceFile struct {
	path, temp string
	size       int64
	f          *os.File    // the temporary file
	out        *DirectFile // f, large pieces' aligned middles written directly; nil for a clone
	cloned     bool        // the file shares its source's blocks: pieces are checksummed, not written

	mu      sync.Mutex
	covered Coverage
	err     error
	done    bool
}

// CreatePieces starts a PieceFile of size bytes at path with permission bits perm.
func CreatePieces(path string, perm os.FileMode, size int64) (*PieceFile, error) {
	temp, f, err := CreatePartial(path, os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	if err := Preallocate(f, size); err != nil {
		f.Close()
		os.Remove(temp)
		return nil, err
	}
	return &PieceFile{path: path, temp: temp, size: size, f: f, out: NewDirectFile(temp, f)}, nil
}

// ErrNotCloned: ClonePieces could not share the source's blocks because the file system makes
// no clones of it (none at all, none of a file on another file system, none of this file); the
// caller writes the copy instead. The error wraps the system's reason.
var ErrNotCloned = errors.New("file not cloned")

// ClonePieces starts a PieceFile of size bytes at path that is a clone of the open file src: the
// two share their blocks until either is written (a reflink, as cp --reflink makes, on file
// systems that have them), so the copy costs no writes and no space. Its pieces are then the
// bytes the caller holds of src (read for other work): WriteAt and WriteAtSum take their
// checksums and check that they tile the file, as for a written copy, without writing them, and
// Commit returns the CRC-32C they combine to, which is the file's as long as src did not change
// between the clone and the reads (the caller checks that, by src's ChangeTime). Where the file
// system makes no clone it returns an error wrapping ErrNotCloned; on other failures (no space, an
// I/O error, a clone of another size) another error; either way it leaves nothing behind.
func ClonePieces(path string, perm os.FileMode, src *os.File, size int64) (*PieceFile, error) {
	temp, f, err := CreatePartial(path, os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*PieceFile, error) {
		f.Close()
		os.Remove(temp)
		return nil, err
	}
	if err := cloneFile(f, src); err != nil {
		if cloneRefused(err) {
			err = fmt.Errorf("%s: %w: %w", src.Name(), ErrNotCloned, err)
		} else {
			err = fmt.Errorf("clone %s to %s: %w", src.Name(), temp, err)
		}
		return fail(err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if st.Size() != size {
		return fail(fmt.Errorf("%s: %w: its clone has %d bytes, not %d", src.Name(), ErrPieces, st.Size(), size))
	}
	return &PieceFile{path: path, temp: temp, size: size, f: f, cloned: true}, nil
}

// Cloned reports whether the file shares its source's blocks (ClonePieces).
func (p *PieceFile) Cloned() bool { return p.cloned }

// Size is the file's size.
func (p *PieceFile) Size() int64 { return p.size }

// WriteAt writes b at offset off (in a clone, takes its checksum only: the file holds b there
// already). The range must lie inside the file and overlap nothing written before (ErrPieces).
// The first error is kept: later calls and Commit return it.
func (p *PieceFile) WriteAt(b []byte, off int64) error {
	return p.WriteAtSum(b, off, UpdateCRC32C(0, b))
}

// WriteAtSum is WriteAt for a caller that has the CRC-32C of b already (taken while b was in
// cache, as it was read).
func (p *PieceFile) WriteAtSum(b []byte, off int64, crc uint32) error {
	n := int64(len(b))
	p.mu.Lock()
	err := p.err
	switch {
	case err != nil:
	case p.done:
		err = fmt.Errorf("%s: write after commit or abort: %w", p.path, os.ErrClosed)
	case off < 0 || n > p.size || off > p.size-n:
		err = p.failLocked(fmt.Errorf("%s: %w: bytes [%d, %d) outside [0, %d)", p.path, ErrPieces, off, off+n, p.size))
	default:
		if hit, ok := p.covered.Add(off, n, crc); !ok {
			err = p.failLocked(fmt.Errorf("%s: %w: bytes [%d, %d) overlap bytes [%d, %d) written before", p.path, ErrPieces, off, off+n, hit.Lo, hit.Hi))
		}
	}
	out := p.out
	p.mu.Unlock()
	if err != nil || n == 0 || p.cloned {
		return err
	}
	if out == nil {
		return fmt.Errorf("%s: write after commit or abort: %w", p.path, os.ErrClosed)
	}
	if _, err := out.WriteAt(b, off); err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.failLocked(fmt.Errorf("%s: %w", p.temp, err))
	}
	return nil
}

// Gaps returns the ranges not written yet, in order.
func (p *PieceFile) Gaps() []Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.covered.Gaps(p.size)
}

// Commit checks that every byte was written, syncs the file, renames it to its path and syncs
// the directory; it returns the file's CRC-32C. On any failure the temporary file is removed and
// nothing appears at the path. Writes must not be in progress.
func (p *PieceFile) Commit() (uint32, error) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return 0, fmt.Errorf("%s: %w", p.path, os.ErrClosed)
	}
	p.done = true
	err := p.err
	crc, whole := p.covered.Whole(p.size)
	if err == nil && !whole {
		g := p.covered.Gaps(p.size)[0]
		err = fmt.Errorf("%s: %w: bytes [%d, %d) never written", p.path, ErrPieces, g.Lo, g.Hi)
	}
	p.mu.Unlock()
	if err == nil {
		err = p.f.Sync()
	}
	p.closeFiles(&err)
	if err := FinishPartial(p.temp, p.path, err); err != nil {
		return 0, err
	}
	return crc, nil
}

// Abort removes the temporary file; it is a no-op after Commit, so `defer p.Abort()` is safe.
func (p *PieceFile) Abort() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	p.mu.Unlock()
	var err error
	p.closeFiles(&err)
	os.Remove(p.temp)
}

// closeFiles closes both descriptors, keeping the first error in *err.
func (p *PieceFile) closeFiles(err *error) {
	p.mu.Lock()
	out := p.out
	p.out = nil
	p.mu.Unlock()
	if out != nil {
		out.Close()
	}
	if cerr := p.f.Close(); *err == nil {
		*err = cerr
	}
}

func (p *PieceFile) failLocked(err error) error {
	if p.err == nil {
		p.err = err
	}
	return p.err
}
