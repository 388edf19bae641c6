//go:build unix

package localstore

import (
	"os"
	"syscall"
)

// flockExclusive waits for an exclusive advisory lock on f (released when f is closed).
func flockExclusive(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}
