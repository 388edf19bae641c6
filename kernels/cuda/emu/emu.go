//go:build cudaemu

// Package emu runs the CUDA backend's host code (package kernels/cuda/host: shapes, chunks,
// buffer layouts, kernel arguments, result decoding) with the kernels of pdq.cu compiled as
// C++ for the host (shim.h supplies the CUDA built-ins) instead of the GPU. Each kernel runs as
// one thread over its whole grid. The parity suite on this backend checks the kernels'
// arithmetic and the host code against kernels.CPU on a machine without a GPU; NewDevices
// serves several emulated devices as one backend, as the CUDA backend serves a host's GPUs. It
// does not exercise the driver calls, streams and pinned staging, the parallel reductions of
// fp8_absmax and chol_diag with more than one thread, or the hardware's arithmetic: those need
// gpucheck on a GPU.
//
// Build with CGO_ENABLED=1 and -tags cudaemu (needs a C++17 compiler); make test-cuda-emu.
package emu

/*
#cgo CXXFLAGS: -std=c++17 -O2 -fno-strict-aliasing
#include <stdlib.h>

const char *emu_source_sha256(void);
int emu_launch(int k, unsigned gx, unsigned gy, const unsigned long long *args);
void emu_memset(unsigned long long dst, int v, long long n);
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"pdq/internal/floatcodec"
	"pdq/kernels/cuda/host"
)

// Backend is the CUDA backend's host code on one emulated device. The zero value is not usable:
// call New.
type Backend struct {
	host.Ops
	r *runner
}

// New returns an emulated device; Close frees its buffers.
func New() *Backend {
	r := &runner{}
	var table [256]float32
	for i := range table {
		table[i] = floatcodec.F8E4M3ToFloat32(uint8(i))
	}
	r.table.ensure(len(table) * 4)
	copy(r.table.bytes(len(table)*4), unsafe.Slice((*byte)(unsafe.Pointer(&table[0])), len(table)*4))
	return &Backend{Ops: host.Ops{R: r}, r: r}
}

// Name returns "cuda-emu".
func (*Backend) Name() string { return "cuda-emu" }

// Close frees the buffers.
func (b *Backend) Close() {
	launchMu.Lock()
	defer launchMu.Unlock()
	b.r.in.free()
	b.r.out.free()
	b.r.table.free()
}

// Devices is n emulated devices served as one backend by host.Pool, as the CUDA backend serves
// the GPUs of a host: each device has its own buffers and its own e4m3 table.
type Devices struct {
	*host.Pool
	devs []*Backend
}

// NewDevices returns n emulated devices (n ≥ 1), each taking up to slots calls at once.
func NewDevices(n, slots int) (*Devices, error) {
	d := &Devices{}
	ops := make([]host.Ops, n)
	for i := range n {
		b := New()
		d.devs = append(d.devs, b)
		ops[i] = b.Ops
	}
	p, err := host.NewPool(slots, ops...)
	if err != nil {
		return nil, err
	}
	d.Pool = p
	return d, nil
}

// Close frees every device's buffers.
func (d *Devices) Close() {
	for _, b := range d.devs {
		b.Close()
	}
}

// SourceSHA256 returns the hex SHA-256 of the pdq.cu this package was compiled from, or
// "unknown" when the build did not pass it (see make test-cuda-emu).
func SourceSHA256() string { return C.GoString(C.emu_source_sha256()) }

// cbuf is C memory, standing in for a device buffer (its address is the "device address").
type cbuf struct {
	p unsafe.Pointer
	n int
}

func (c *cbuf) ensure(n int) {
	if c.n >= n {
		return
	}
	c.free()
	c.p, c.n = C.malloc(C.size_t(max(n, 1))), n
}

func (c *cbuf) free() {
	if c.p != nil {
		C.free(c.p)
	}
	c.p, c.n = nil, 0
}

func (c *cbuf) bytes(n int) []byte { return unsafe.Slice((*byte)(c.p), c.n)[:n] }

func (c *cbuf) addr() uint64 { return uint64(uintptr(c.p)) }

// launchMu serializes the emulated devices: the kernels share the shim's launch state.
var launchMu sync.Mutex

// runner implements host.Runner: chunks run one after the other; the input and the output
// buffers are shared by all chunks, as a device buffer set is, and the output is poisoned
// before each chunk so that a kernel that leaves bytes unwritten is caught.
type runner struct {
	in, out cbuf
	table   cbuf
}

// Run implements host.Runner.
func (r *runner) Run(j host.Job) error {
	launchMu.Lock()
	defer launchMu.Unlock()
	for i := range j.Chunks {
		in, out := j.Sizes(i)
		r.in.ensure(in)
		r.out.ensure(out)
		j.Stage(i, r.in.bytes(in))
		poison := r.out.bytes(out)
		for k := range poison {
			poison[k] = 0xA5 ^ byte(k*13)
		}
		if err := j.Launch(i, stream{}, r.in.addr(), r.out.addr()); err != nil {
			return err
		}
		if err := j.Finish(i, r.out.bytes(j.BackBytes(i, out))); err != nil {
			return err
		}
	}
	return nil
}

// Grid implements host.Runner; the emulation ignores grids except fp8_absmax's.
func (r *runner) Grid(n, threads int) int { return 1 }

// E4M3Table implements host.Runner.
func (r *runner) E4M3Table() uint64 { return r.table.addr() }

type stream struct{}

// Memset8 implements host.Stream.
func (stream) Memset8(dst uint64, v byte, n int) error {
	C.emu_memset(C.ulonglong(dst), C.int(v), C.longlong(n))
	return nil
}

// Launch implements host.Stream.
func (stream) Launch(k host.Kernel, gx, gy, threads int, args ...uint64) error {
	if err := host.CheckArgs(k, args); err != nil {
		return err
	}
	a := make([]C.ulonglong, len(args))
	for i, v := range args {
		a[i] = C.ulonglong(v)
	}
	if C.emu_launch(C.int(k), C.uint(gx), C.uint(gy), &a[0]) != 0 {
		return fmt.Errorf("emu: unknown kernel %d", k)
	}
	return nil
}
