//go:build !unix

package convert

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
