package fsutil

import (
	"os"
	"syscall"
	"time"
)

// ChangeTime returns the status-change time of fi (ctime: moved by every write and every change
// of the inode, and, unlike the modification time, not settable from user space), or the zero
// time where the system does not say.
func ChangeTime(fi os.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return time.Time{}
}
