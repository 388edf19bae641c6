//go:build unix

package fsutil

import (
	"os"
	"syscall"
)

// openNonBlocking opens name with O_NONBLOCK, which makes opening a FIFO return at once; reads of
// regular files do not heed the flag.
func openNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
