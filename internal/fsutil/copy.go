package fsutil

import (
	"context"
	"io"
	"os"
	"sync/atomic"
	"unsafe"
)

// copyChunk is the size of one read and one write of CopyAtomic: large enough that system
// calls cost little, small enough to stay in a core's cache between the read, the checksum and
// the write, and a multiple of every block size direct I/O asks for.
const copyChunk = 1 << 20

// directAlign is the buffer and length alignment direct writes get (the largest logical block
// size in common use).
const directAlign = 4096

// CopyAtomic writes the bytes of src to path as WriteAtomicPerm does (temporary name, sync,
// rename, directory sync; nothing at path on failure), feeding them to h (when not nil) as they
// pass. It stops between chunks when ctx is cancelled. Where the file system takes direct I/O
// (Linux O_DIRECT), whole chunks bypass the page cache: a copy of hundreds of gigabytes neither
// evicts what the rest of the run reads nor pays for allocating cache pages it never reads
// again; the unaligned tail, any file system that refuses direct writes, and every write when
// PDQ_DIRECT_IO=0 is set, go through the cache as usual. It returns the number of bytes copied.
func CopyAtomic(ctx context.Context, path string, perm os.FileMode, src io.Reader, h io.Writer) (int64, error) {
	var n int64
	err := writeAtomicFile(path, perm, func(f *os.File) error {
		raw := make([]byte, copyChunk+directAlign)
		buf := alignedSlice(raw, directAlign, copyChunk)
		direct := !noDirect && setDirect(f, true)
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			k, rerr := io.ReadFull(src, buf)
			if k > 0 {
				if h != nil {
					h.Write(buf[:k])
				}
				var err error
				direct, err = writeChunk(f, buf[:k], direct)
				if err != nil {
					return err
				}
				n += int64(k)
			}
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				return nil
			}
			if rerr != nil {
				return rerr
			}
		}
	})
	return n, err
}

// writeChunk writes b at f's offset: its aligned part directly while direct holds, the rest
// (and everything, once a direct write is refused) through the page cache. It returns whether
// direct writes are still on.
func writeChunk(f *os.File, b []byte, direct bool) (bool, error) {
	if direct {
		whole := len(b) &^ (directAlign - 1)
		if whole > 0 {
			n, err := f.Write(b[:whole])
			directBytes.Add(int64(n))
			b = b[n:] // what went out stays written: the offset moved past it
			if err != nil && !directRefused(err) {
				return direct, err
			}
			if err != nil {
				direct = setDirect(f, false) // the file system takes no direct writes after all
			}
		}
		if len(b) > 0 && direct {
			direct = setDirect(f, false) // the tail: unaligned, and the last write
		}
	}
	_, err := f.Write(b)
	return direct, err
}

// noDirect turns direct writes off (PDQ_DIRECT_IO=0): for file systems where O_DIRECT is
// accepted but slow, such as some network mounts.
var noDirect = os.Getenv("PDQ_DIRECT_IO") == "0"

// directBytes counts the bytes written directly (tests look at it).
var directBytes atomic.Int64

// alignedSlice returns n bytes of raw starting at an address that is a multiple of align; raw
// must hold n+align bytes.
func alignedSlice(raw []byte, align, n int) []byte {
	off := 0
	if r := int(addrOf(raw) % uintptr(align)); r != 0 {
		off = align - r
	}
	return raw[off : off+n]
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
