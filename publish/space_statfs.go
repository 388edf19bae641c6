//go:build linux || darwin || freebsd

package publish

import (
	"io/fs"
	"syscall"
)

// freeSpace returns the bytes an unprivileged user may still write on the file system of dir.
func freeSpace(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), true
}

// allocated returns the bytes a file occupies on disk (a partly downloaded file is sparse).
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
