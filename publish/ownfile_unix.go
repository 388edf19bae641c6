//go:build unix

package publish

import (
	"io/fs"
	"syscall"
)

// nonBlock keeps an open of a FIFO from waiting for a writer.
const nonBlock = syscall.O_NONBLOCK

// linkCount returns the number of hard links of a file.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// identityOf returns what tells a file's version apart without reading it: size, modification
// and status-change times (the latter no user can set back), inode and device.
func identityOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	ctime, ok := changeNs(st)
	if !ok {
		return fileID{}, false
	}
	return fileID{
		Size: fi.Size(), ModNs: fi.ModTime().UnixNano(), ChangeNs: ctime,
		Inode: uint64(st.Ino), Device: uint64(st.Dev),
	}, true
}
