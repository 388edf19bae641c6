//go:build !linux

package fsutil

import (
	"os"
)

// setDirect: direct I/O is used on Linux only; elsewhere every write goes through the cache.
func setDirect(*os.File, bool) bool { return false }

func directRefused(error) bool { return false }
