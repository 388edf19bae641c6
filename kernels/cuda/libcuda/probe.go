//go:build cuda || cudaemu

package libcuda

/*
int cuDeviceGetCount(int *count); // a trampoline of trampolines_*.S
*/
import "C"

import "fmt"

// DeviceCount returns the number of devices the driver sees (CUDA_VISIBLE_DEVICES applies). It
// calls the driver through its trampoline, so without a usable driver it reports the driver's
// not-initialized error.
func DeviceCount() (int, error) {
	var n C.int
	if r := C.cuDeviceGetCount(&n); r != 0 {
		return 0, fmt.Errorf("cuda: cuDeviceGetCount: CUresult %d", int(r))
	}
	return int(n), nil
}
