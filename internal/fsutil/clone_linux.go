package fsutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// cloneFile makes dst, an empty file, share src's blocks (the FICLONE ioctl: XFS with reflink,
// btrfs, bcachefs, OCFS2, ZFS 2.2 with block cloning). The file systems that cannot say so with
// EOPNOTSUPP (a different file system, EXDEV; no such ioctl, ENOTTY; EINVAL) refuse it all the same.
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
