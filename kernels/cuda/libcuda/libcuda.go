//go:build cuda || cudaemu

// Package libcuda loads the CUDA driver (libcuda.so.1) when it is first used instead of when
// the program starts, so that one binary built with the CUDA backend starts on machines without
// a driver or a GPU and converts on the CPU there.
//
// gorgonia.org/cu calls the driver API directly and links -lcuda. The cuda build resolves that
// flag to an empty static archive (kernels/cuda.mk), and this package defines every function of
// the driver API itself: cuInit dlopens libcuda.so.1 and fills a table with the driver's
// functions, every other function is a two-instruction trampoline through that table. The
// binary therefore has no dynamic dependency on libcuda.so.1. Without a driver, or when the
// driver's cuInit fails, cuInit still returns success (gorgonia.org/cu's package init exits the
// process otherwise) and every other driver call returns CUDA_ERROR_NOT_INITIALIZED; Status
// tells the program which case it is in before it uses the GPU.
//
// The environment variable PDQ_LIBCUDA names another library to load instead of libcuda.so.1
// (tests use it).
package libcuda

/*
#include <stdlib.h>
#include "loader.h"
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrNoDriver reports that libcuda.so.1 could not be loaded.
var ErrNoDriver = errors.New("cuda: no CUDA driver (libcuda.so.1)")

// ErrInit reports that the driver loaded but its cuInit failed (no device, a driver too old).
var ErrInit = errors.New("cuda: the CUDA driver did not initialize")

// Status loads the driver if that has not been tried yet and reports whether it is usable:
// nil, or an error wrapping ErrNoDriver or ErrInit with the loader's or the driver's reason.
func Status() error {
	var result C.int
	buf := (*C.char)(C.malloc(512))
	defer C.free(unsafe.Pointer(buf))
	state := C.pdq_cuda_status(&result, buf, 512)
	reason := C.GoString(buf)
	switch state {
	case C.PDQ_CUDA_READY:
		return nil
	case C.PDQ_CUDA_NO_DRIVER:
		return fmt.Errorf("%w: %s", ErrNoDriver, reason)
	case C.PDQ_CUDA_INIT_FAILED:
		return fmt.Errorf("%w: %s", ErrInit, reason)
	}
	return fmt.Errorf("cuda: driver loader in state %d", int(state))
}

// Symbols returns the number of driver functions the package provides trampolines for.
func Symbols() int { return int(C.pdq_cuda_symbols()) }
