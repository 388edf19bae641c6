//go:build !(linux || darwin || freebsd)

package publish

import "io/fs"

// freeSpace is unknown here: pull meets a full disk when it writes.
func freeSpace(string) (int64, bool) { return 0, false }

// allocated returns a file's size.
func allocated(fi fs.FileInfo) int64 { return fi.Size() }
