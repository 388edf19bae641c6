//go:build !linux

package fsutil

import "os"

// StartWriteBack does nothing outside Linux: Sync writes everything back when called.
func StartWriteBack(*os.File) {}
