//go:build !linux

package fsutil

import (
	"errors"
	"os"
)

// cloneFile is refused outside Linux: the copy is written.
func cloneFile(dst, src *os.File) error { return errors.ErrUnsupported }

func cloneRefused(err error) bool { return errors.Is(err, errors.ErrUnsupported) }
