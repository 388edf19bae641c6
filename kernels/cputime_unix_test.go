//go:build unix

package kernels

import (
	"syscall"
	"time"
)

// cpuTime returns the user+system CPU time of the process: with -cpu 1 that is the
// benchmark's own time, which other load on a shared machine does not inflate as it does
// wall time.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
