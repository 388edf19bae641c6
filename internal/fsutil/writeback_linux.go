package fsutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteBack asks the kernel to start writing f's dirty pages to the device without waiting
// for them (sync_file_range with SYNC_FILE_RANGE_WRITE), so that a later Sync waits only for
// what was written since. Errors are ignored: the Sync that follows reports what matters.
func StartWriteBack(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	})
}
