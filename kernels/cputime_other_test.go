//go:build !unix

package kernels

import "time"

// cpuTime is not measured here; the cpu-ns/weight metric reads 0.
func cpuTime() time.Duration { return 0 }
