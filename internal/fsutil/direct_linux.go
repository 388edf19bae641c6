package fsutil

import (
	"errors"
	"os"
	"syscall"
)

// setDirect turns direct I/O (O_DIRECT) on f on or off and reports whether it is now on.
func setDirect(f *os.File, on bool) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		if e != 0 {
			ferr = e
			return
		}
		if on {
			flags |= syscall.O_DIRECT
		} else {
			flags &^= syscall.O_DIRECT
		}
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, flags); e != 0 {
			ferr = e
		}
	}); err != nil || ferr != nil {
		return false
	}
	return on
}

// directRefused reports whether a write failed only because the file system (or this file's
// alignment needs) does not take direct I/O.
func directRefused(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}
