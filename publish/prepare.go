package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"pdq/internal/fsutil"
	"pdq/publish/store"
	"pdq/publish/zipnn"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// localSource is what publish reads a local file through.
type localSource interface {
	io.Reader
	io.ReaderAt
	io.Closer
	Stat() (os.FileInfo, error)
	Name() string
}

// openSource opens a local file to read, refusing what is not a regular file (a FIFO is never
// opened for reading); every read of a file to publish goes through it (tests count them).
var openSource = func(name string) (localSource, error) {
	f, err := fsutil.OpenRegular(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// readBufs recycles the read buffers of hashing passes.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// sums are what one pass over a local file gives: its SHA-256 and the CRC32C of each part.
type sums struct {
	size     int64
	sha256   string
	partSize int64
	crcs     []uint32 // one per part; one (of nothing) for an empty file
	// id is the file's identity while it was read (nil: unknown, or it changed meanwhile).
	id *fileID
}

// partSizeFor returns the part size to use for a file: the requested one, raised (to a whole MiB)
// when the file would need more than store.MaxParts parts.
func partSizeFor(size, want int64) int64 {
	if n := (size + want - 1) / want; n > store.MaxParts {
		per := (size + store.MaxParts - 1) / store.MaxParts
		return (per + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return want
}

// hashFile reads path once, computing its SHA-256 and the CRC32C of each part of partSize; p
// (nil: none) is told of every byte read.
func hashFile(ctx context.Context, path string, partSize int64, p Progress) (sums, error) {
	if p == nil {
		p = noProgress{}
	}
	f, err := openSource(path)
	if err != nil {
		return sums{}, fmt.Errorf("publish: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return sums{}, fmt.Errorf("publish: %w", err)
	}
	s := sums{size: fi.Size(), partSize: partSizeFor(fi.Size(), partSize)}
	h := sha256.New()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var crc uint32
	inPart, total := int64(0), int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return sums{}, err
		}
		n, rerr := f.Read(buf)
		b := buf[:n]
		h.Write(b)
		p.Add(int64(n))
		total += int64(n)
		for len(b) > 0 {
			take := min(int64(len(b)), s.partSize-inPart)
			crc = crc32.Update(crc, castagnoli, b[:take])
			b, inPart = b[take:], inPart+take
			if inPart == s.partSize {
				s.crcs, crc, inPart = append(s.crcs, crc), 0, 0
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return sums{}, fmt.Errorf("publish: read %s: %w", path, rerr)
		}
	}
	if inPart > 0 || total == 0 {
		s.crcs = append(s.crcs, crc)
	}
	if total != s.size {
		return sums{}, fmt.Errorf("publish: %s changed size while being read (%d, then %d bytes)", path, s.size, total)
	}
	s.sha256 = hex.EncodeToString(h.Sum(nil))
	if after, err := f.Stat(); err == nil {
		before, ok1 := identityOf(fi)
		now, ok2 := identityOf(after)
		if ok1 && ok2 && before == now {
			s.id = &now
		}
	}
	return s, nil
}

// partLen returns the length of part i (0-based).
func (s sums) partLen(i int) int64 { return min(s.partSize, s.size-int64(i)*s.partSize) }

// compressFile writes the zipnn container of the file at path to a new temporary file in dir and
// returns its name and the compression statistics. Safetensors files are coded tensor by tensor;
// anything else as bytes. p (nil: none) is told of every byte compressed.
func compressFile(ctx context.Context, path, dir string, workers int, p Progress) (string, zipnn.Stats, error) {
	if p == nil {
		p = noProgress{}
	}
	src, err := openSource(path)
	if err != nil {
		return "", zipnn.Stats{}, fmt.Errorf("publish: %w", err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return "", zipnn.Stats{}, fmt.Errorf("publish: %w", err)
	}
	plan, err := zipnn.PlanSafetensors(src, fi.Size())
	if errors.Is(err, zipnn.ErrNotSafetensors) {
		plan = zipnn.PlanBytes(fi.Size())
	} else if err != nil {
		return "", zipnn.Stats{}, fmt.Errorf("publish: %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "pdq-publish-*.zipnn")
	if err != nil {
		return "", zipnn.Stats{}, fmt.Errorf("publish: %w", err)
	}
	st, err := zipnn.Compress(ctx, tmp, countingReaderAt{src, p}, fi.Size(), plan, zipnn.Options{Workers: workers})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", zipnn.Stats{}, fmt.Errorf("publish: compress %s: %w", path, err)
	}
	return tmp.Name(), st, nil
}

// countingReaderAt tells a Progress of every byte read.
type countingReaderAt struct {
	r io.ReaderAt
	p Progress
}

// ReadAt implements io.ReaderAt.
func (c countingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.p.Add(int64(n))
	return n, err
}
