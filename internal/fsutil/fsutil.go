// Package fsutil holds the file operations every writer of the project shares: files that appear
// under their final name only when complete (write to ".NAME.partial", sync, rename, sync the
// directory), and hashing a file's bytes.
package fsutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// PartialName is the temporary name WriteAtomic writes path under, in the same directory.
func PartialName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
}

// WriteAtomic writes a file through fill under PartialName(path), syncs it, renames it to path
// and syncs the directory. The temporary file is created fresh (an existing one, or a link
// planted under its name, is removed first, never written through). On any error it is
// removed and path is untouched.
func WriteAtomic(path string, fill func(io.Writer) error) error {
	return WriteAtomicPerm(path, 0o644, fill)
}

// WriteAtomicPerm is WriteAtomic creating the file with permission bits perm (exactly: the
// umask can only narrow them).
func WriteAtomicPerm(path string, perm os.FileMode, fill func(io.Writer) error) error {
	return writeAtomicFile(path, perm, func(f *os.File) error { return fill(f) })
}

// writeAtomicFile is the frame of the atomic writers: fill writes the fresh temporary file f,
// which is then synced, closed, renamed to path, and the directory synced.
func writeAtomicFile(path string, perm os.FileMode, fill func(f *os.File) error) error {
	tmp, f, err := CreatePartial(path, os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err := FinishPartial(tmp, path, err); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CreatePartial creates the temporary file of path, PartialName(path), fresh, opened with flag
// (os.O_WRONLY or os.O_RDWR) and permission bits perm: whatever lay under that name (a crashed
// run's file, a link planted there) is removed first, never written through.
func CreatePartial(path string, flag int, perm os.FileMode) (string, *os.File, error) {
	tmp := PartialName(path)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, err
	}
	f, err := os.OpenFile(tmp, flag|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", nil, err
	}
	return tmp, f, nil
}

// FinishPartial ends the temporary file tmp of path, synced and closed by the caller with the
// outcome err: without an error it renames tmp to path and syncs the directory; on any error,
// err's or its own, it removes tmp, leaving path untouched, and returns the error.
func FinishPartial(tmp, path string, err error) error {
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// WriteFileAtomic is WriteAtomic of data.
func WriteFileAtomic(path string, data []byte) error {
	return WriteAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// SyncDir flushes a directory entry change (a rename) to disk. File systems that cannot sync a
// directory (EINVAL, ENOTSUP) are accepted as they are.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

// HashFile returns the size and hex SHA-256 of a file's bytes; it stops between 8 MiB reads
// when ctx is cancelled.
func HashFile(ctx context.Context, path string) (int64, string, error) {
	h := sha256.New()
	n, err := sumFile(ctx, path, h)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// sumFile feeds a file's bytes to h in 8 MiB reads, stopping when ctx is cancelled.
func sumFile(ctx context.Context, path string, h hash.Hash) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 8<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		k, rerr := io.ReadFull(f, buf)
		h.Write(buf[:k])
		n += int64(k)
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return n, nil
		}
		if rerr != nil {
			return 0, fmt.Errorf("read %s: %w", path, rerr)
		}
	}
}

// crc32c is the Castagnoli table (hardware-accelerated on amd64 and arm64).
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns a fresh CRC-32C (Castagnoli) hash.
func CRC32C() hash.Hash32 { return crc32.New(crc32c) }

// CRCFile returns the size and CRC-32C of a file's bytes (about 25 GB/s here against 1.8 for
// SHA-256: for checking one's own files after a crash, not against an adversary); it stops
// between 8 MiB reads when ctx is cancelled.
func CRCFile(ctx context.Context, path string) (int64, uint32, error) {
	h := CRC32C()
	n, err := sumFile(ctx, path, h)
	if err != nil {
		return 0, 0, err
	}
	return n, h.Sum32(), nil
}
