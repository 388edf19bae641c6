//go:build cuda || cudaemu

// Package host is the host side of the CUDA backend without the driver: for every
// kernels.Backend method it checks the shapes, splits the slab into chunks, lays out each
// chunk's input and output buffers, packs the 8-byte kernel arguments and reads the results
// back. A Runner executes the chunks: the CUDA backend on the GPU (pinned staging, two streams
// per call), or kernels/cuda/emu on the host with pdq.cu compiled as C++, so the same code is
// tested without a GPU.
package host

import (
	"fmt"
	"unsafe"

	"pdq/kernels"
)

// Kernel names a kernel of pdq.cu.
type Kernel int

// The kernels of pdq.cu.
const (
	DecodeBF16 Kernel = iota
	DecodeF16
	DequantFP8
	DequantInt4
	Int4G32
	Int4G64
	Int4Any
	FP8Absmax // grid: one 256-thread block per 128×128 block
	FP8Quant
	ErrPartial
	CholDiag // grid: one block
	CholPanel
	CholTrail
	CholUnitUpper
	GPTQPerm
	GPTQBlock
	GPTQUpdate
	GPTQPack
	Int4Weighted
	NumKernels
)

// Names are the kernels' symbols in pdq.cu, indexed by Kernel.
var Names = [NumKernels]string{
	"decode_bf16", "decode_f16", "dequant_fp8", "dequant_int4", "int4_quant_g32",
	"int4_quant_g64", "int4_quant_any", "fp8_absmax", "fp8_quant", "err_partial",
	"chol_diag", "chol_panel", "chol_trail", "chol_unit_upper", "gptq_perm", "gptq_block",
	"gptq_update", "gptq_pack", "int4_quant_weighted",
}

// Params are the kernels' parameter counts, indexed by Kernel; every parameter is 8 bytes wide.
// Stream implementations refuse launches with another count.
var Params = [NumKernels]int{3, 3, 9, 5, 8, 8, 8, 5, 5, 6, 5, 5, 5, 4, 5, 13, 7, 3, 11}

// CheckArgs reports a launch of k with the wrong number of arguments.
func CheckArgs(k Kernel, args []uint64) error {
	if k < 0 || k >= NumKernels {
		return fmt.Errorf("cuda: unknown kernel %d", k)
	}
	if len(args) != Params[k] {
		return fmt.Errorf("cuda: kernel %s takes %d arguments, got %d", Names[k], Params[k], len(args))
	}
	return nil
}

// Stream is what a chunk's launch step can enqueue. Addresses are device addresses.
type Stream interface {
	// Memset8 sets n bytes at dst to v.
	Memset8(dst uint64, v byte, n int) error
	// Launch runs kernel k on a gx×gy grid of blocks of threads threads.
	Launch(k Kernel, gx, gy, threads int, args ...uint64) error
}

// Job is one call split into chunks. For chunk i: Stage fills the input buffer, Launch
// enqueues the kernels reading din and writing dout, Finish reads the output buffer (its first
// Back bytes) once the chunk is complete. Finish is called in chunk order, so the first error is the first chunk's.
type Job struct {
	Chunks int
	Sizes  func(i int) (in, out int)
	// Back returns how many leading bytes of chunk i's output come back to the host; the rest
	// of the output buffer is device scratch. Nil: all of it.
	Back   func(i int) int
	Stage  func(i int, in []byte)
	Launch func(i int, s Stream, din, dout uint64) error
	Finish func(i int, out []byte) error
}

// Runner executes jobs.
type Runner interface {
	// Run executes j's chunks in order (overlapping them where it can) and returns the first
	// error.
	Run(j Job) error
	// Grid returns the number of blocks of threads threads for n items of grid-stride work.
	Grid(n, threads int) int
	// E4M3Table returns the device address of the 256 float32 values of the e4m3fn codes.
	E4M3Table() uint64
}

// Ops implements the kernels.Backend methods (and the GPU's extras) on a Runner.
type Ops struct {
	R Runner
}

// BackBytes returns how many bytes of chunk i's output of out bytes come back to the host.
func (j *Job) BackBytes(i, out int) int {
	if j.Back == nil {
		return out
	}
	return min(j.Back(i), out)
}

// ChunkBytes bounds the float32 bytes of one chunk of work.
const ChunkBytes = 16 << 20

// noBad is the kernels' "no non-finite element" marker.
const noBad = ^uint64(0)

// StatsSize is the size of kernels.GroupStats, which the kernels write as it is laid out in Go.
const StatsSize = int(unsafe.Sizeof(kernels.GroupStats{}))

// Int4Mode packs an Int4Params into the mode argument of the INT4 kernels:
// search | signed<<8 | refine<<16 | len(Pos)<<32 | len(Neg)<<48. The candidate table is Pos
// then Neg.
func Int4Mode(p *kernels.Int4Params) uint64 {
	if p.Search != kernels.SearchMSE {
		return 0
	}
	m := 1 | uint64(max(p.Refine, 0))<<16 | uint64(len(p.Pos))<<32 | uint64(len(p.Neg))<<48
	if p.Signed {
		m |= 1 << 8
	}
	return m
}

// Int4Kernel returns the INT4 kernel for group size g (registers for 32 and 64).
func Int4Kernel(g int) Kernel {
	switch g {
	case 32:
		return Int4G32
	case 64:
		return Int4G64
	}
	return Int4Any
}

// Int4Shape packs groups and group size into the shape argument of the INT4 kernels.
func Int4Shape(groups, g int) uint64 { return uint64(groups) | uint64(g)<<40 }

// rowsPerChunk returns how many rows of rowBytes (float32 bytes) make one chunk, at least one
// and a multiple of align.
func rowsPerChunk(rows, rowBytes, align int) int {
	n := max(1, ChunkBytes/max(rowBytes, 1))
	n = max(align, n/align*align)
	return min(n, max(rows, 1))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// f32Bytes views a float32 slice as its little-endian bytes (the GPU and amd64/arm64 hosts are
// little-endian).
func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

func statsBytes(s []kernels.GroupStats) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), StatsSize*len(s))
}
