//go:build !linux

package fsutil

import (
	"errors"
	"os"
)

// Direct I/O is used on Linux only; elsewhere every write goes through the cache.
func directRefused(error) bool { return false }

func openDirectFile(string) (*os.File, error) { return nil, errors.ErrUnsupported }

func cacheBacked(*os.File) bool { return false }
