//go:build cudaemu

// Package emu runs the CUDA kernel source (kernels/pdq.cu) on the host: the file is compiled as
// C++ with host definitions of the CUDA built-ins (shim.h) and each kernel runs as one thread
// over its whole grid. Backend wraps it like the CUDA backend wraps the GPU, so the parity
// suite checks the kernels' arithmetic against kernels.CPU on a machine without a GPU. It does
// not exercise the GPU-only parts: the driver calls, chunking, streams and pinned staging, the
// parallel reduction of fp8_absmax with more than one thread, and the hardware's arithmetic.
//
// Build with CGO_ENABLED=1 and -tags cudaemu (needs a C++17 compiler).
package emu

/*
#cgo CXXFLAGS: -std=c++17 -O2 -fno-strict-aliasing
#include <stdint.h>

void emu_dims(unsigned gx, unsigned gy, unsigned bx, unsigned by);
const char *emu_source_sha256(void);
void decode_bf16(float *dst, const uint16_t *src, long long n);
void decode_f16(float *dst, const uint16_t *src, long long n);
void dequant_fp8(float *dst, const uint8_t *codes, const float *scale, const float *table,
                 long long rows, long long cols, long long bh, long long bw, long long roff);
void dequant_int4(float *dst, const uint32_t *packed, const float *scales, long long words,
                  long long words_per_group);
void int4_quant_g32(uint32_t *packed, uint16_t *scales, void *stats, unsigned long long *bad,
                    const float *src, long long shape, unsigned long long mode, const float *cand);
void int4_quant_g64(uint32_t *packed, uint16_t *scales, void *stats, unsigned long long *bad,
                    const float *src, long long shape, unsigned long long mode, const float *cand);
void int4_quant_any(uint32_t *packed, uint16_t *scales, void *stats, unsigned long long *bad,
                    const float *src, long long shape, unsigned long long mode, const float *cand);
void fp8_absmax(float *scale, unsigned long long *bad, const float *src, long long rows, long long cols);
void fp8_quant(uint8_t *codes, const float *scale, const float *src, long long rows, long long cols);
void err_partial(double *out, long long *idx, const float *ref, const float *got, long long n, long long chunk);
*/
import "C"

import (
	"fmt"
	"math"
	"sync"

	"pdq/kernels"
	"pdq/kernels/cuda/parity"
	"pdq/safetensors"
)

const noBad = math.MaxUint64

// Backend runs the kernels of pdq.cu on the host. The kernels share the shim's launch state,
// so calls are serialized.
type Backend struct {
	mu sync.Mutex
}

var e4m3Table = func() (t [256]float32) {
	for i := range t {
		t[i] = safetensors.F8E4M3ToFloat32(uint8(i))
	}
	return t
}()

// SourceSHA256 returns the hex SHA-256 of the pdq.cu this package was compiled from, or
// "unknown" when the build did not pass it (see make test-cuda-emu).
func SourceSHA256() string { return C.GoString(C.emu_source_sha256()) }

// Name returns "cuda-emu".
func (*Backend) Name() string { return "cuda-emu" }

// one returns the grid of a whole-array launch.
func one() { C.emu_dims(1, 1, 0, 0) }

// QuantizeInt4 implements kernels.Backend with the kernels of the CUDA backend.
func (b *Backend) QuantizeInt4(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params) error {
	g := p.GroupSize
	n := rows * cols
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 || len(src) != n || len(out.Packed) != n/2 ||
		len(out.Scales) != 2*(n/g) || len(out.Stats) != n/g {
		return kernels.CPU{}.QuantizeInt4(out, src, rows, cols, p)
	}
	if n == 0 {
		return nil
	}
	// The same argument packing as the CUDA backend (kernels/cuda/int4.go).
	cand := append(append(append([]float32(nil), p.Pos...), p.Neg...), 0) // never empty
	var mode uint64
	if p.Search == kernels.SearchMSE {
		mode = 1 | uint64(len(p.Pos))<<32 | uint64(len(p.Neg))<<48 | uint64(max(p.Refine, 0))<<16
		if p.Signed {
			mode |= 1 << 8
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	one()
	bad := C.ulonglong(noBad)
	pk, sc, st := (*C.uint32_t)(ptr(out.Packed)), (*C.uint16_t)(ptr(out.Scales)), ptr(parity.StatsBytes(out.Stats))
	x, shape, md, cd := (*C.float)(&src[0]), C.longlong(uint64(n/g)|uint64(g)<<40), C.ulonglong(mode), (*C.float)(&cand[0])
	switch g {
	case 32:
		C.int4_quant_g32(pk, sc, st, &bad, x, shape, md, cd)
	case 64:
		C.int4_quant_g64(pk, sc, st, &bad, x, shape, md, cd)
	default:
		C.int4_quant_any(pk, sc, st, &bad, x, shape, md, cd)
	}
	if bad != noBad {
		return &kernels.NonFiniteError{Index: int64(bad), Value: src[bad]}
	}
	return nil
}

// DequantizeInt4 implements kernels.Backend.
func (b *Backend) DequantizeInt4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	g := groupSize
	n := rows * cols
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 || len(dst) != n || len(packed) != n/2 || len(scales) != n/g {
		return kernels.CPU{}.DequantizeInt4(dst, packed, scales, rows, cols, groupSize)
	}
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	one()
	C.dequant_int4((*C.float)(&dst[0]), (*C.uint32_t)(ptr(packed)), (*C.float)(&scales[0]), C.longlong(n/8), C.longlong(g/8))
	return nil
}

// QuantizeFP8Block implements kernels.Backend.
func (b *Backend) QuantizeFP8Block(codes []byte, scaleInv []float32, src []float32, rows, cols int) error {
	const B = kernels.FP8Block
	n := rows * cols
	br, bc := (rows+B-1)/B, (cols+B-1)/B
	if rows < 0 || cols < 0 || len(src) != n || len(codes) != n || len(scaleInv) != br*bc {
		return kernels.CPU{}.QuantizeFP8Block(codes, scaleInv, src, rows, cols)
	}
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bad := C.ulonglong(noBad)
	for bi := range br {
		for bj := range bc {
			C.emu_dims(C.uint(bc), C.uint(br), C.uint(bj), C.uint(bi))
			C.fp8_absmax((*C.float)(&scaleInv[0]), &bad, (*C.float)(&src[0]), C.longlong(rows), C.longlong(cols))
		}
	}
	if bad != noBad {
		// The key of the CUDA backend (kernels/cuda/fp8.go).
		k := uint64(bad)
		c, r, blk := int(k%B), int(k/B%B), int(k/(B*B))
		idx := int64(blk/bc*B+r)*int64(cols) + int64(blk%bc*B+c)
		return &kernels.NonFiniteError{Index: idx, Value: src[idx]}
	}
	one()
	C.fp8_quant((*C.uint8_t)(&codes[0]), (*C.float)(&scaleInv[0]), (*C.float)(&src[0]), C.longlong(rows), C.longlong(cols))
	return nil
}

// DequantizeFP8Block implements kernels.Backend.
func (b *Backend) DequantizeFP8Block(dst []float32, codes []byte, scale []float32, rows, cols, bh, bw int) error {
	n := rows * cols
	if rows < 0 || cols < 0 || bh <= 0 || bw <= 0 || len(dst) != n || len(codes) != n || len(scale) != ((rows+bh-1)/bh)*((cols+bw-1)/bw) {
		return kernels.CPU{}.DequantizeFP8Block(dst, codes, scale, rows, cols, bh, bw)
	}
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	one()
	C.dequant_fp8((*C.float)(&dst[0]), (*C.uint8_t)(&codes[0]), (*C.float)(&scale[0]), (*C.float)(&e4m3Table[0]),
		C.longlong(rows), C.longlong(cols), C.longlong(bh), C.longlong(bw), 0)
	return nil
}

// ErrorSums implements kernels.Backend: the CPU's sequential sum, as in the CUDA backend.
func (b *Backend) ErrorSums(ref, got []float32, base int64) kernels.ErrSums {
	return kernels.CPU{}.ErrorSums(ref, got, base)
}

// DecodeDense decodes BF16 or F16 with the decode kernels.
func (b *Backend) DecodeDense(dst []float32, src []byte, dt safetensors.DType) error {
	if len(src) != 2*len(dst) || (dt != safetensors.BF16 && dt != safetensors.F16) {
		return fmt.Errorf("emu: decode %s: %d bytes for %d elements", dt, len(src), len(dst))
	}
	if len(dst) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	one()
	if dt == safetensors.BF16 {
		C.decode_bf16((*C.float)(&dst[0]), (*C.uint16_t)(ptr(src)), C.longlong(len(dst)))
	} else {
		C.decode_f16((*C.float)(&dst[0]), (*C.uint16_t)(ptr(src)), C.longlong(len(dst)))
	}
	return nil
}

// ErrorSumsChunked runs err_partial and adds the chunk sums in order, like the CUDA backend.
func (b *Backend) ErrorSumsChunked(ref, got []float32, base int64) (kernels.ErrSums, error) {
	n := len(ref)
	s := kernels.ErrSums{N: int64(n), MaxAbsIdx: -1}
	if n == 0 {
		return s, nil
	}
	k := (n + parity.ErrChunk - 1) / parity.ErrChunk
	out := make([]float64, 6*k)
	idx := make([]int64, k)
	b.mu.Lock()
	one()
	C.err_partial((*C.double)(&out[0]), (*C.longlong)(&idx[0]), (*C.float)(&ref[0]), (*C.float)(&got[0]), C.longlong(n), parity.ErrChunk)
	b.mu.Unlock()
	for c := range k {
		o := out[6*c:]
		s.SumSqRef += o[0]
		s.SumSqErr += o[1]
		s.SumAbsErr += o[2]
		s.Dot += o[3]
		s.SumSqGot += o[4]
		if o[5] > s.MaxAbsErr || s.MaxAbsIdx < 0 {
			s.MaxAbsErr, s.MaxAbsIdx = o[5], base+idx[c]
		}
	}
	return s, nil
}
