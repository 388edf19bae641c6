//go:build !unix

package fsutil

import "errors"

// FreeBytes is not known on this system.
func FreeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
