//go:build !linux

package fsutil

import "os"

// Preallocate sizes the file f to size bytes (outside Linux the blocks are allocated as the data
// is written).
func Preallocate(f *os.File, size int64) error { return f.Truncate(size) }
