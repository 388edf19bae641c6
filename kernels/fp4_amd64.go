//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// The hand-written parts of the FP4 batches and error sums (fp4*_amd64.s), AVX-512 forms run by
// the avx512 loop set and VEX-only AVX2 forms run by the avx2 set (scripts/avx2-emu.sh runs
// them on a CPU without AVX-512). The Go compiler gives the vector code of fp4batch_avx512.go
// fifteen registers: its final pass reloads six vectors and spills per row, and its transpose
// goes through memory twice. The assembly keeps every constant, sum and code word of a pass in
// registers, transposes in registers, and takes fewer steps per element:
//
//   - the BF16 rounding of the ratio r (at most 6 first: every ratio above rounds to code 7) is
//     (r + C) - C with C = 2^(e+16), e r's exponent: the ulp of C's binade is BF16's at r, and
//     the float32 addition rounds to nearest even;
//   - the rounding of that BF16 value a to the E2M1 grid is (a + D) - D with D = 2^(max(e,0)+22):
//     steps of 1/2 below 2, of one significand bit from 2 on, nearest even, which is the
//     grid's rule (ties to the even index);
//   - the low four bits of (a + D)'s bits plus max(e,0)+127 shifted left by one index a table of
//     the codes (0xe, 0xf, 0, 1, 2, 3, 4, 5 for 0, 1/2, 1, 3/2, 2, 3, 4, 6);
//   - an element clips where r > 6 + 2^-6, the midpoint above 6 of BF16 (the tie rounds to 6).
//
// The sums add in the specification's order (lane j: rows j, j+8, ... in order; the eight lanes
// combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7))), so the results are the Go loops' bits:
// TestSIMDFP4 and the batch tests run both (fp4NoAsm).

// fp4TransposeAVX512 transposes sixteen groups of 16·blocks elements, group l at
// src[l·stride:], into dst (16·blocks rows of sixteen, row e lane l = element e of group l) and
// writes each group's largest |x| bit pattern to amax.
//
//go:noescape
func fp4TransposeAVX512(dst, src *float32, blocks, stride int, amax *[16]uint32)

// fp4PackNVAVX512 is fp4PackRows for sixteen transposed NVFP4 groups under the scales s, inv
// their reciprocals 1/s: error sums, Σx², clip counts and the code words W0, W1 to r. A row's
// ratios are |x|·inv unless a lane's product lies within 32 units of a BF16 rounding midpoint,
// where the row takes the division (the product is within a few units of the quotient, and
// only the quotient's BF16 rounding is used: TestSIMDFP4ProductNearMidpoint).
//
//go:noescape
func fp4PackNVAVX512(t *[256]float32, s, inv *[16]float32, r *fp4Batch)

// fp4PackMXAVX512 is fp4PackRows for sixteen transposed MXFP4 groups under the power-of-two
// scales s with their exact reciprocals inv: error sums, Σx², clip counts, words W0..W3.
//
//go:noescape
func fp4PackMXAVX512(t *[512]float32, s, inv *[16]float32, r *fp4Batch)

// fp4TransposeAVX2 is fp4TransposeAVX512 for eight groups of 8·blocks elements (rows of
// eight).
//
//go:noescape
func fp4TransposeAVX2(dst, src *float32, blocks, stride int, amax *[8]uint32)

// fp4PackNVAVX2 is fp4PackRows8 for eight transposed NVFP4 groups under the scales s (the
// ratios by division): error sums, Σx² and clip counts in the first eight lanes of r's fields,
// the code words W0, W1 at r.words[0:8], r.words[8:16]. It uses r.rtn as scratch.
//
//go:noescape
func fp4PackNVAVX2(t *[128]float32, s *[8]float32, r *fp4Batch)

// fp4PackMXAVX2 is fp4PackNVAVX2 for eight transposed MXFP4 groups (words W0..W3).
//
//go:noescape
func fp4PackMXAVX2(t *[256]float32, s *[8]float32, r *fp4Batch)

// fp4ErrChunkAVX512 is fp4ChunkFull's loop over groups groups of gw words each (gw·groups =
// maxChunk/8), the first with the scale *scales: it adds to s's sums and sets s.bm, and
// writes the |errors| to ab (s.ab).
//
//go:noescape
func fp4ErrChunkAVX512(s *sums512, ab *float64, ref *float32, words *uint32, scales *float32, groups, gw int)

// fp4ErrNVAVX512 is fp4ErrRows for sixteen transposed NVFP4 groups under the scales s (inv
// their reciprocals, the ratios as in fp4PackNVAVX512): each group's error to e (which may be
// s).
//
//go:noescape
func fp4ErrNVAVX512(t *[256]float32, s, inv *[16]float32, e *[16]float32)

// fp4ErrMXAVX512 is fp4ErrRows for sixteen transposed MXFP4 groups under the power-of-two
// scales s with their exact reciprocals inv.
//
//go:noescape
func fp4ErrMXAVX512(t *[512]float32, s, inv *[16]float32, e *[16]float32)

// fp4ErrAsm16 is fp4ErrRows of the n rows of t (16 for NVFP4, 32 for MXFP4) by the assembly.
func fp4ErrAsm16(t []float32, n int, s archsimd.Float32x16) archsimd.Float32x16 {
	// The errors overwrite the scales (read first): a third array would be zeroed with
	// legacy-SSE stores here.
	var sv, inv [16]float32
	s.Store(&sv)
	archsimd.BroadcastFloat32x16(1).Div(s).Store(&inv)
	if n == NVFP4GroupSize {
		fp4ErrNVAVX512((*[256]float32)(t), &sv, &inv, &sv)
	} else {
		fp4ErrMXAVX512((*[512]float32)(t), &sv, &inv, &sv)
	}
	return archsimd.LoadFloat32x16(&sv)
}

// fp4ErrNVAVX2 is fp4ErrRows8 for eight transposed NVFP4 groups under the scales s (the
// ratios by division): each group's error to e (which may be s).
//
//go:noescape
func fp4ErrNVAVX2(t *[128]float32, s *[8]float32, e *[8]float32)

// fp4ErrMXAVX2 is fp4ErrNVAVX2 for eight transposed MXFP4 groups.
//
//go:noescape
func fp4ErrMXAVX2(t *[256]float32, s *[8]float32, e *[8]float32)

// fp4ErrAsm8 is fp4ErrRows8 of the n rows of t (16 for NVFP4, 32 for MXFP4) by the assembly.
func fp4ErrAsm8(t []float32, n int, s archsimd.Float32x8) archsimd.Float32x8 {
	var sv [8]float32 // the scales, then the errors (see fp4ErrAsm16)
	s.Store(&sv)
	if n == NVFP4GroupSize {
		fp4ErrNVAVX2((*[128]float32)(t), &sv, &sv)
	} else {
		fp4ErrMXAVX2((*[256]float32)(t), &sv, &sv)
	}
	return archsimd.LoadFloat32x8(&sv)
}

// fp4StatsAVX512 writes the statistics of the sixteen groups of r to st.
//
//go:noescape
func fp4StatsAVX512(r *fp4Batch, st *[16]GroupStats)

// fp4ErrChunkAVX2 is (*sums256).chunk of both halves of n elements of ref against got (n a
// multiple of eight, at most maxChunk), |got-ref| to ab (s.ab).
//
//go:noescape
func fp4ErrChunkAVX2(s *sums256, ab *float64, ref, got *float32, n int)

// fp4DecodeAVX2 is expandFP4 of groups groups of gw words each, the first with the scale
// *scales, into dst (8·gw·groups values).
//
//go:noescape
func fp4DecodeAVX2(dst *float32, words *uint32, scales *float32, groups, gw int)

// fp4StatsAVX2 writes the statistics of the first eight groups of r to st.
//
//go:noescape
func fp4StatsAVX2(r *fp4Batch, st *[8]GroupStats)

// The assembly stores into fp4Batch at these offsets.
const (
	_ = uint(unsafe.Offsetof(fp4Batch{}.err)) - 0
	_ = 0 - uint(unsafe.Offsetof(fp4Batch{}.err))
	_ = uint(unsafe.Offsetof(fp4Batch{}.ss)) - 128
	_ = 128 - uint(unsafe.Offsetof(fp4Batch{}.ss))
	_ = uint(unsafe.Offsetof(fp4Batch{}.clip)) - 192
	_ = 192 - uint(unsafe.Offsetof(fp4Batch{}.clip))
	_ = uint(unsafe.Offsetof(fp4Batch{}.words)) - 256
	_ = 256 - uint(unsafe.Offsetof(fp4Batch{}.words))
	_ = uint(unsafe.Offsetof(fp4Batch{}.rtn)) - 64
	_ = 64 - uint(unsafe.Offsetof(fp4Batch{}.rtn))
	_ = uint(unsafe.Sizeof(GroupStats{})) - 16
	_ = 16 - uint(unsafe.Sizeof(GroupStats{}))
	_ = uint(unsafe.Offsetof(GroupStats{}.Err)) - 4
	_ = 4 - uint(unsafe.Offsetof(GroupStats{}.Err))
	_ = uint(unsafe.Offsetof(GroupStats{}.RTNErr)) - 8
	_ = 8 - uint(unsafe.Offsetof(GroupStats{}.RTNErr))
	_ = uint(unsafe.Offsetof(GroupStats{}.Clipped)) - 12
	_ = 12 - uint(unsafe.Offsetof(GroupStats{}.Clipped))
)

// The assembly reads and writes sums512 at these offsets.
const (
	_ = uint(unsafe.Offsetof(sums512{}.se)) - 64
	_ = 64 - uint(unsafe.Offsetof(sums512{}.se))
	_ = uint(unsafe.Offsetof(sums512{}.sa)) - 128
	_ = 128 - uint(unsafe.Offsetof(sums512{}.sa))
	_ = uint(unsafe.Offsetof(sums512{}.dt)) - 192
	_ = 192 - uint(unsafe.Offsetof(sums512{}.dt))
	_ = uint(unsafe.Offsetof(sums512{}.sg)) - 256
	_ = 256 - uint(unsafe.Offsetof(sums512{}.sg))
	_ = uint(unsafe.Offsetof(sums512{}.bm)) - 384
	_ = 384 - uint(unsafe.Offsetof(sums512{}.bm))
)

// The assembly reads and writes sums256 at these offsets.
const (
	_ = uint(unsafe.Offsetof(sums256{}.se)) - 64
	_ = 64 - uint(unsafe.Offsetof(sums256{}.se))
	_ = uint(unsafe.Offsetof(sums256{}.sa)) - 128
	_ = 128 - uint(unsafe.Offsetof(sums256{}.sa))
	_ = uint(unsafe.Offsetof(sums256{}.dt)) - 192
	_ = 192 - uint(unsafe.Offsetof(sums256{}.dt))
	_ = uint(unsafe.Offsetof(sums256{}.sg)) - 256
	_ = 256 - uint(unsafe.Offsetof(sums256{}.sg))
	_ = uint(unsafe.Offsetof(sums256{}.bm)) - 320
	_ = 320 - uint(unsafe.Offsetof(sums256{}.bm))
)
