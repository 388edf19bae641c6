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

// cacheBacked reports whether f lies on a file system whose direct writes go to its page
// cache anyway (tmpfs): a staging copy would then be a copy for nothing.
func cacheBacked(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var st syscall.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return false
	}
	return st.Type == tmpfsMagic
}

// tmpfsMagic is tmpfs's f_type (TMPFS_MAGIC).
const tmpfsMagic = 0x01021994
