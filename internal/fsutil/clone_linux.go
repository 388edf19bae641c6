package fsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// cloneRefused reports whether a clone failed only because none can be made here: the file
// system has no clones (EOPNOTSUPP, or ENOTTY and ENOSYS for no such call), the source lies on
// another one (EXDEV), or this file cannot be cloned (EINVAL; EPERM, ETXTBSY: an immutable,
// append-only or swap file).
func cloneRefused(err error) bool {
	for _, e := range []error{unix.EOPNOTSUPP, unix.ENOTTY, unix.ENOSYS, unix.EXDEV, unix.EINVAL, unix.EPERM, unix.ETXTBSY} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// cloneFile makes dst, an empty file, share src's blocks (the FICLONE ioctl: XFS with reflink,
// btrfs, bcachefs, OCFS2, ZFS 2.2 with block cloning).
func cloneFile(dst, src *os.File) error {
	rd, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	rs, err := src.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	if err := rd.Control(func(d uintptr) {
		if err := rs.Control(func(s uintptr) {
			cerr = ignoringEINTR(func() error { return unix.IoctlFileClone(int(d), int(s)) })
		}); err != nil {
			cerr = err
		}
	}); err != nil {
		return err
	}
	return cerr
}
