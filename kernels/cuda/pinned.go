//go:build cuda

package cuda

/*
#include <cuda.h>

static CUresult pdqAllocHost(void **p, size_t n) { return cuMemAllocHost(p, n); }
static CUresult pdqFreeHost(void *p) { return cuMemFreeHost(p); }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// hostBuf is page-locked host memory from cuMemAllocHost: the only kind of host memory the
// driver copies asynchronously, so staging through it lets copies overlap kernels.
type hostBuf struct {
	p unsafe.Pointer
	n int
}

// ensure makes h hold at least n bytes, reallocating (contents lost) when it is smaller. The
// context must be current and no copy may be using the buffer.
func (h *hostBuf) ensure(n int) error {
	if h.n >= n {
		return nil
	}
	h.free()
	n = roundUp(n, 1<<20)
	var p unsafe.Pointer
	if r := C.pdqAllocHost(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: cuMemAllocHost(%d bytes): CUresult %d", n, int(r))
	}
	h.p, h.n = p, n
	return nil
}

// free releases the buffer; the zero hostBuf is valid and free does nothing on it.
func (h *hostBuf) free() {
	if h.p != nil {
		C.pdqFreeHost(h.p)
	}
	h.p, h.n = nil, 0
}

// bytes returns the first n bytes of the buffer as a slice (n <= h.n).
func (h *hostBuf) bytes(n int) []byte { return unsafe.Slice((*byte)(h.p), h.n)[:n] }

func roundUp(n, m int) int { return (n + m - 1) / m * m }
