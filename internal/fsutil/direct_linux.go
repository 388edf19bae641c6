package fsutil

import (
	"errors"
	"os"
	"syscall"
)

// directRefused reports whether a write failed only because the file system (or this file's
// alignment needs) does not take direct I/O.
func directRefused(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}

// openDirectFile opens name for direct writes (O_WRONLY|O_DIRECT, never following a link).
func openDirectFile(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT|syscall.O_NOFOLLOW, 0)
}
