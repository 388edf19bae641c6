//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// Go 1.26 compiles a logical right shift of all lanes (ShiftAllRight of an unsigned vector:
// VPSRLD, VPSRLQ) with its count in an xmm register loaded by a legacy-SSE MOVQ, even when the
// count is a constant; the left and the arithmetic shifts get immediate forms. On Intel cores
// that MOVQ, amid instructions that leave the upper register halves dirty, costs an AVX-SSE
// transition each time (the AVX-512 loops ran slower than the scalar ones). The loops therefore
// shift right arithmetically (sra8, sra16) where the lanes' sign bit is clear or the bits it
// fills are dropped afterwards, and otherwise per lane by a count vector built before the loop
// (ShiftRight: VPSRLVD, VPSRLVQ). TestNoLegacySSEInVectorCode keeps it so.

// sra8 is v>>n of 32-bit lanes, arithmetic: v.ShiftAllRight(n) wherever bit 31 is clear or
// the top n bits of the result are dropped.
func sra8(v archsimd.Uint32x8, n uint64) archsimd.Uint32x8 {
	return v.AsInt32x8().ShiftAllRight(n).AsUint32x8()
}

// sra16 is sra8 for sixteen lanes.
func sra16(v archsimd.Uint32x16, n uint64) archsimd.Uint32x16 {
	return v.AsInt32x16().ShiftAllRight(n).AsUint32x16()
}

// The vector loops leave the upper halves of the vector registers dirty; every scalar float
// instruction (legacy SSE, as Go compiles it) after them pays for it on Intel cores until a
// VZEROUPPER (archsimd.ClearAVXUpperBits). The compiler does not know that VZEROUPPER clobbers
// the registers' upper halves, so the loops call it only where no vector wider than 128 bits is
// live: at their ends, before a scalar tail, in functions not inlined where that matters.

// bcAt is bc(*p) without a scalar load into an xmm register: the bits go through a general
// register (VMOVD, VPBROADCASTD).
func bcAt(p *float32) archsimd.Float32x8 {
	return archsimd.BroadcastUint32x8(*(*uint32)(unsafe.Pointer(p))).AsFloat32x8()
}

// storeLane0 stores lane 0 of v at p through a general register (VPEXTRD).
func storeLane0(p *float32, v archsimd.Float32x4) {
	*(*uint32)(unsafe.Pointer(p)) = v.AsUint32x4().GetElem(0)
}

// lane0 returns lane 0 of v after clearing the upper halves of the vector registers: v goes
// through memory, so the scalar read follows the VZEROUPPER.
func lane0(v archsimd.Float32x4) float32 {
	p := (*[4]float32)(unsafe.Pointer(&v))
	archsimd.ClearAVXUpperBits()
	return p[0]
}

// lane0x2 is lane0 of two vectors.
func lane0x2(a, b archsimd.Float32x4) (float32, float32) {
	pa, pb := (*[4]float32)(unsafe.Pointer(&a)), (*[4]float32)(unsafe.Pointer(&b))
	archsimd.ClearAVXUpperBits()
	return pa[0], pb[0]
}

// lane0x3 is lane0 of three vectors.
func lane0x3(a, b, c archsimd.Float32x4) (float32, float32, float32) {
	pa, pb, pc := (*[4]float32)(unsafe.Pointer(&a)), (*[4]float32)(unsafe.Pointer(&b)), (*[4]float32)(unsafe.Pointer(&c))
	archsimd.ClearAVXUpperBits()
	return pa[0], pb[0], pc[0]
}
