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
