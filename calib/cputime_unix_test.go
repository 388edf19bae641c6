//go:build unix

package calib_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time this process has used (user + system), or 0 if unknown. With
// -cpu 1 it measures the benchmark's own work even when other processes share the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
