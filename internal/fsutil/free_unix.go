//go:build unix

package fsutil

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FreeBytes returns the bytes an unprivileged user may still write on the file system that holds
// path, or of its nearest existing parent when path does not exist yet.
func FreeBytes(path string) (int64, error) {
	p := filepath.Clean(path)
	for {
		if _, err := os.Stat(p); err == nil || filepath.Dir(p) == p {
			break
		}
		p = filepath.Dir(p)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: p, Err: err}
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
}
