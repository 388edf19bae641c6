//go:build !unix

package fsutil

import (
	"fmt"
	"os"
)

// openNonBlocking refuses what is not a regular file before opening it (systems without FIFOs
// that block an open).
func openNonBlocking(name string) (*os.File, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, fileKind(fi.Mode()))
	}
	return os.Open(name)
}
