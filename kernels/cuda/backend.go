//go:build cuda

// Package cuda is the CUDA backend of package kernels: the same loops as kernels.CPU, run on an
// NVIDIA GPU through the driver API (gorgonia.org/cu), with byte-identical results.
//
// The kernels are the PTX of kernels/pdq.cu, embedded in the binary (kernels.CUDAPTX). Every
// call stages its input through page-locked host memory and splits large slabs into chunks
// that alternate between two streams, so that copies in, kernels and copies out overlap; a
// Backend holds several such stream pairs and serves that many calls at once.
//
// The driver is loaded when first used (package kernels/cuda/libcuda): a binary built with the
// cuda tag starts on machines without libcuda.so.1 or a GPU, where Devices and New report an
// error wrapping libcuda.ErrNoDriver or libcuda.ErrInit. Open serves several GPUs as one
// kernels.Backend.
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"pdq/internal/floatcodec"
	"pdq/kernels"
	"pdq/kernels/cuda/host"
	"pdq/kernels/cuda/libcuda"
)

// Slots is the number of calls a Backend runs at once, each on its own pair of streams.
const Slots = 4

// ErrNoDevice reports that the driver sees no CUDA device.
var ErrNoDevice = errors.New("cuda: no CUDA device")

// Backend runs the kernels on one GPU. It implements kernels.Backend and is safe for
// concurrent use; Close releases it.
type Backend struct {
	dev   cu.Device
	ctx   cu.CUContext
	name  string
	sms   int
	mod   cu.Module
	fn    [host.NumKernels]cu.Function
	e4m3  cu.DevicePtr // the 256 float32 values of the e4m3fn codes
	slots chan *slot
	all   []*slot

	// Ops provides the kernels.Backend methods (shapes, chunks, layouts, arguments); the
	// Backend is its Runner.
	host.Ops
}

// Backend implements kernels.Backend.
var _ kernels.Backend = (*Backend)(nil)

// slot is what one call owns: two streams and a buffer set per stream.
type slot struct {
	streams [2]cu.Stream
	sets    [2]bufSet
}

// bufSet is one chunk's staging: pinned input and output, and their device twins.
type bufSet struct {
	hin, hout hostBuf
	din, dout devBuf
}

// devBuf is a growable device allocation.
type devBuf struct {
	p cu.DevicePtr
	n int
}

func (d *devBuf) ensure(n int) error {
	if d.n >= n {
		return nil
	}
	d.free()
	n = roundUp(n, 1<<20)
	p, err := cu.MemAlloc(int64(n))
	if err != nil {
		return fmt.Errorf("cuda: allocate %d device bytes: %w", n, err)
	}
	d.p, d.n = p, n
	return nil
}

func (d *devBuf) free() {
	if d.n > 0 {
		_ = cu.MemFree(d.p)
	}
	d.p, d.n = 0, 0
}

// Devices returns the number of CUDA devices the driver sees (after CUDA_VISIBLE_DEVICES), or
// the loader's error when there is no usable driver.
func Devices() (int, error) {
	if err := libcuda.Status(); err != nil {
		return 0, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("cuda: count devices: %w", err)
	}
	return n, nil
}

// New opens device ordinal: it retains its primary context, loads the kernels and creates the
// streams. Close releases them.
func New(ordinal int) (b *Backend, err error) {
	n, err := Devices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device %d of %d", ErrNoDevice, ordinal, n)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b = &Backend{slots: make(chan *slot, Slots)}
	b.Ops = host.Ops{R: b}
	if b.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if b.name, err = b.dev.Name(); err != nil {
		return nil, fmt.Errorf("cuda: device %d name: %w", ordinal, err)
	}
	if b.sms, err = b.dev.Attribute(cu.MultiprocessorCount); err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if b.ctx, err = b.dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("cuda: device %d primary context: %w", ordinal, err)
	}
	if err = cu.SetCurrentContext(b.ctx); err != nil {
		return nil, fmt.Errorf("cuda: set context: %w", err)
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.mod, err = cu.LoadData(kernels.CUDAPTX); err != nil {
		return nil, fmt.Errorf("cuda: load the PTX kernels: %w", err)
	}
	for k, name := range host.Names {
		if b.fn[k], err = b.mod.Function(name); err != nil {
			return nil, fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
	}
	var table [256]float32
	for i := range table {
		table[i] = floatcodec.F8E4M3ToFloat32(uint8(i))
	}
	if b.e4m3, err = cu.MemAlloc(int64(len(table) * 4)); err != nil {
		return nil, fmt.Errorf("cuda: allocate the e4m3 table: %w", err)
	}
	if err = cu.MemcpyHtoD(b.e4m3, unsafe.Pointer(&table[0]), int64(len(table)*4)); err != nil {
		return nil, fmt.Errorf("cuda: copy the e4m3 table: %w", err)
	}
	for range Slots {
		s := &slot{}
		b.all = append(b.all, s)
		for k := range s.streams {
			if s.streams[k], err = cu.MakeStream(cu.NonBlocking); err != nil {
				return nil, fmt.Errorf("cuda: create a stream: %w", err)
			}
		}
		b.slots <- s
	}
	return b, nil
}

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

// DeviceName returns the GPU's name as the driver reports it (e.g. "NVIDIA H200").
func (b *Backend) DeviceName() string { return b.name }

// Close waits for every call to finish and releases the streams, buffers and kernels.
func (b *Backend) Close() error {
	for range b.all {
		<-b.slots
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: set context: %w", err)
	}
	b.close()
	return nil
}

func (b *Backend) close() {
	for _, s := range b.all {
		for k := range s.streams {
			_ = s.streams[k].Synchronize()
			_ = s.streams[k].Destroy()
			s.sets[k].hin.free()
			s.sets[k].hout.free()
			s.sets[k].din.free()
			s.sets[k].dout.free()
		}
	}
	b.all = nil
	if b.e4m3 != 0 {
		_ = cu.MemFree(b.e4m3)
		b.e4m3 = 0
	}
	if b.mod != (cu.Module{}) {
		_ = b.mod.Unload()
	}
}

// Current makes the backend's context current on the calling OS thread, which must be locked
// (runtime.LockOSThread) for as long as it issues CUDA calls.
func (b *Backend) Current() error {
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: set context: %w", err)
	}
	return nil
}

// Grid returns the number of thread blocks of size threads for n items of work, capped at 32
// blocks per multiprocessor (the kernels loop over the rest).
func (b *Backend) Grid(n, threads int) int {
	return max(1, min((n+threads-1)/threads, 32*b.sms))
}

// E4M3Table returns the device address of the e4m3fn value table.
func (b *Backend) E4M3Table() uint64 { return uint64(b.e4m3) }

// stream adapts a cu.Stream to host.Stream.
type stream struct {
	b *Backend
	s cu.Stream
}

// Memset8 implements host.Stream.
func (s stream) Memset8(dst uint64, v byte, n int) error {
	return cu.MemsetD8Async(cu.DevicePtr(dst), v, int64(n), s.s)
}

// Launch implements host.Stream.
func (s stream) Launch(k host.Kernel, gx, gy, threads int, args ...uint64) error {
	if err := host.CheckArgs(k, args); err != nil {
		return err
	}
	return launch(s.b.fn[k], gx, gy, threads, s.s, args...)
}

// launch runs fn with 8-byte arguments on stream s.
func launch(fn cu.Function, gx, gy, threads int, s cu.Stream, args ...uint64) error {
	ptrs := make([]unsafe.Pointer, len(args))
	for i := range args {
		ptrs[i] = unsafe.Pointer(&args[i])
	}
	if err := fn.Launch(gx, gy, 1, threads, 1, 1, 0, s, ptrs); err != nil {
		return fmt.Errorf("cuda: launch: %w", err)
	}
	return nil
}
