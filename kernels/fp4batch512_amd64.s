//go:build goexperiment.simd && amd64

#include "textflag.h"
#include "fp4_amd64.h"

// The AVX-512 FP4 batches: the transpose of sixteen groups with their absolute maxima, the final
// pass of NVFP4 and MXFP4 (codes, error, Σx² and clips under the chosen scales) and the store of
// the statistics. Each function ends with VZEROUPPER; fp4_amd64.go explains them.

// MXRATIO: the same with |x|·(1/s) (AX: the reciprocals), exact for powers of two.
#define MXRATIO(off) \
	VPANDD off(SI), Z31, Z1; \
	VMULPS (AX), Z1, Z2

// FIRST and NEXT start and continue a sum lane: E and S add d² and x² in row order.
#define FIRST(E, S) \
	VMULPS Z6, Z6, E; \
	VMULPS Z1, Z1, S

#define NEXT(E, S) \
	VMULPS Z6, Z6, Z6; \
	VADDPS Z6, E, E; \
	VMULPS Z1, Z1, Z7; \
	VADDPS Z7, S, S

// The tree of the eight lanes as they complete (j the lane): Z15/Z11 lane j even, Z14/Z10
// lane j odd, Z13/Z9 (l0+l1) then the first half, Z12/Z8 (l4+l5) then the second half.
#define TREE1 \
	VADDPS Z14, Z15, Z13; \
	VADDPS Z10, Z11, Z9

#define TREE3 \
	VADDPS Z14, Z15, Z15; \
	VADDPS Z15, Z13, Z13; \
	VADDPS Z10, Z11, Z11; \
	VADDPS Z11, Z9, Z9

#define TREE5 \
	VADDPS Z14, Z15, Z12; \
	VADDPS Z10, Z11, Z8

#define TREE7 \
	VADDPS Z14, Z15, Z15; \
	VADDPS Z15, Z12, Z12; \
	VADDPS Z12, Z13, Z13; \
	VADDPS Z10, Z11, Z11; \
	VADDPS Z11, Z8, Z8; \
	VADDPS Z8, Z9, Z9

// NVLANE: lane j of sixteen NVFP4 groups (rows j and j+8), its sums into E, S.
#define NVLANE(j, E, S, d0, d1) \
	NVRATIO(64*j, d0); \
	ELEM(64*j, Z19); \
	FIRST(E, S); \
	NVRATIO(64*(j+8), d1); \
	ELEM(64*(j+8), Z18); \
	NEXT(E, S)

// MXLANE: lane j of sixteen MXFP4 groups (rows j, j+8, j+16, j+24).
#define MXLANE(j, E, S) \
	MXRATIO(64*j); \
	ELEM(64*j, Z19); \
	FIRST(E, S); \
	MXRATIO(64*(j+8)); \
	ELEM(64*(j+8), Z18); \
	NEXT(E, S); \
	MXRATIO(64*(j+16)); \
	ELEM(64*(j+16), Z17); \
	NEXT(E, S); \
	MXRATIO(64*(j+24)); \
	ELEM(64*(j+24), Z16); \
	NEXT(E, S)

// FP4STORE writes the error sums, Σx², clip counts and words W0..W3 to the fp4Batch at DI.
#define FP4STORE \
	VMOVUPS   Z13, 0(DI); \
	VMOVUPS   Z9, 128(DI); \
	VMOVDQU32 Z20, 192(DI); \
	VMOVDQU32 Z19, 256(DI); \
	VMOVDQU32 Z18, 320(DI); \
	VMOVDQU32 Z17, 384(DI); \
	VMOVDQU32 Z16, 448(DI)

// func fp4TransposeAVX512(dst, src *float32, blocks, stride int, amax *[16]uint32)
//
// Transposes blocks column blocks of sixteen groups: group l's elements 16c..16c+15 are read at
// src + 4·(l·stride + 16c) and element 16c+e of every group is written to row 16c+e of dst
// (sixteen floats, group l in lane l). amax gets the largest |x| bit pattern of each group.
// Stages: 32-bit and 64-bit interleaves of row pairs, then two exchanges of 128-bit lanes.
TEXT ·fp4TransposeAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ blocks+16(FP), R9
	MOVQ stride+24(FP), CX
	MOVQ amax+32(FP), DX
	SHLQ $2, CX
	LEAQ (CX)(CX*2), R8
	VPXORD    Z17, Z17, Z17
	VMOVDQU32 Z17, (DX)

block:
	MOVQ    SI, AX
	VMOVUPS (AX), Z0
	VMOVUPS (AX)(CX*1), Z1
	VMOVUPS (AX)(CX*2), Z2
	VMOVUPS (AX)(R8*1), Z3
	LEAQ    (AX)(CX*4), AX
	VMOVUPS (AX), Z4
	VMOVUPS (AX)(CX*1), Z5
	VMOVUPS (AX)(CX*2), Z6
	VMOVUPS (AX)(R8*1), Z7
	LEAQ    (AX)(CX*4), AX
	VMOVUPS (AX), Z8
	VMOVUPS (AX)(CX*1), Z9
	VMOVUPS (AX)(CX*2), Z10
	VMOVUPS (AX)(R8*1), Z11
	LEAQ    (AX)(CX*4), AX
	VMOVUPS (AX), Z12
	VMOVUPS (AX)(CX*1), Z13
	VMOVUPS (AX)(CX*2), Z14
	VMOVUPS (AX)(R8*1), Z15

	// Stage 1: rows 2k, 2k+1 → Z16+2k (elements 4q, 4q+1 of each), Z17+2k (4q+2, 4q+3).
	VUNPCKLPS Z1, Z0, Z16
	VUNPCKHPS Z1, Z0, Z17
	VUNPCKLPS Z3, Z2, Z18
	VUNPCKHPS Z3, Z2, Z19
	VUNPCKLPS Z5, Z4, Z20
	VUNPCKHPS Z5, Z4, Z21
	VUNPCKLPS Z7, Z6, Z22
	VUNPCKHPS Z7, Z6, Z23
	VUNPCKLPS Z9, Z8, Z24
	VUNPCKHPS Z9, Z8, Z25
	VUNPCKLPS Z11, Z10, Z26
	VUNPCKHPS Z11, Z10, Z27
	VUNPCKLPS Z13, Z12, Z28
	VUNPCKHPS Z13, Z12, Z29
	VUNPCKLPS Z15, Z14, Z30
	VUNPCKHPS Z15, Z14, Z31

	// Stage 2: Z(4G+m), lane q = element 4q+m of rows 4G..4G+3.
	VUNPCKLPD Z18, Z16, Z0
	VUNPCKHPD Z18, Z16, Z1
	VUNPCKLPD Z19, Z17, Z2
	VUNPCKHPD Z19, Z17, Z3
	VUNPCKLPD Z22, Z20, Z4
	VUNPCKHPD Z22, Z20, Z5
	VUNPCKLPD Z23, Z21, Z6
	VUNPCKHPD Z23, Z21, Z7
	VUNPCKLPD Z26, Z24, Z8
	VUNPCKHPD Z26, Z24, Z9
	VUNPCKLPD Z27, Z25, Z10
	VUNPCKHPD Z27, Z25, Z11
	VUNPCKLPD Z30, Z28, Z12
	VUNPCKHPD Z30, Z28, Z13
	VUNPCKLPD Z31, Z29, Z14
	VUNPCKHPD Z31, Z29, Z15

	// Stages 3 and 4: for each m the 4×4 matrix of 128-bit lanes of Z(m), Z(4+m), Z(8+m),
	// Z(12+m) transposed, so that Z(4q+m) holds element 4q+m of the sixteen rows.
	VSHUFF32X4 $0x44, Z4, Z0, Z16
	VSHUFF32X4 $0xee, Z4, Z0, Z17
	VSHUFF32X4 $0x44, Z12, Z8, Z18
	VSHUFF32X4 $0xee, Z12, Z8, Z19
	VSHUFF32X4 $0x44, Z5, Z1, Z20
	VSHUFF32X4 $0xee, Z5, Z1, Z21
	VSHUFF32X4 $0x44, Z13, Z9, Z22
	VSHUFF32X4 $0xee, Z13, Z9, Z23
	VSHUFF32X4 $0x44, Z6, Z2, Z24
	VSHUFF32X4 $0xee, Z6, Z2, Z25
	VSHUFF32X4 $0x44, Z14, Z10, Z26
	VSHUFF32X4 $0xee, Z14, Z10, Z27
	VSHUFF32X4 $0x44, Z7, Z3, Z28
	VSHUFF32X4 $0xee, Z7, Z3, Z29
	VSHUFF32X4 $0x44, Z15, Z11, Z30
	VSHUFF32X4 $0xee, Z15, Z11, Z31

	VSHUFF32X4 $0x88, Z18, Z16, Z0
	VSHUFF32X4 $0xdd, Z18, Z16, Z4
	VSHUFF32X4 $0x88, Z19, Z17, Z8
	VSHUFF32X4 $0xdd, Z19, Z17, Z12
	VSHUFF32X4 $0x88, Z22, Z20, Z1
	VSHUFF32X4 $0xdd, Z22, Z20, Z5
	VSHUFF32X4 $0x88, Z23, Z21, Z9
	VSHUFF32X4 $0xdd, Z23, Z21, Z13
	VSHUFF32X4 $0x88, Z26, Z24, Z2
	VSHUFF32X4 $0xdd, Z26, Z24, Z6
	VSHUFF32X4 $0x88, Z27, Z25, Z10
	VSHUFF32X4 $0xdd, Z27, Z25, Z14
	VSHUFF32X4 $0x88, Z30, Z28, Z3
	VSHUFF32X4 $0xdd, Z30, Z28, Z7
	VSHUFF32X4 $0x88, Z31, Z29, Z11
	VSHUFF32X4 $0xdd, Z31, Z29, Z15

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VMOVUPS Z8, 512(DI)
	VMOVUPS Z9, 576(DI)
	VMOVUPS Z10, 640(DI)
	VMOVUPS Z11, 704(DI)
	VMOVUPS Z12, 768(DI)
	VMOVUPS Z13, 832(DI)
	VMOVUPS Z14, 896(DI)
	VMOVUPS Z15, 960(DI)

	// The absolute maxima: |x| bit patterns compared as unsigned integers (NaN above +Inf).
	VPBROADCASTD fp4AsmK<>+0x00(SB), Z16
	VPANDD       Z16, Z0, Z17
	VPANDD       Z16, Z1, Z18
	VPANDD       Z16, Z2, Z19
	VPANDD       Z16, Z3, Z20
	VPANDD       Z16, Z4, Z21
	VPANDD       Z16, Z5, Z22
	VPANDD       Z16, Z6, Z23
	VPANDD       Z16, Z7, Z24
	VPANDD       Z16, Z8, Z25
	VPANDD       Z16, Z9, Z26
	VPANDD       Z16, Z10, Z27
	VPANDD       Z16, Z11, Z28
	VPANDD       Z16, Z12, Z29
	VPANDD       Z16, Z13, Z30
	VPANDD       Z16, Z14, Z31
	VPANDD       Z16, Z15, Z16
	VPMAXUD      Z18, Z17, Z17
	VPMAXUD      Z20, Z19, Z19
	VPMAXUD      Z22, Z21, Z21
	VPMAXUD      Z24, Z23, Z23
	VPMAXUD      Z26, Z25, Z25
	VPMAXUD      Z28, Z27, Z27
	VPMAXUD      Z30, Z29, Z29
	VPMAXUD      Z16, Z31, Z31
	VPMAXUD      Z19, Z17, Z17
	VPMAXUD      Z23, Z21, Z21
	VPMAXUD      Z27, Z25, Z25
	VPMAXUD      Z31, Z29, Z29
	VPMAXUD      Z21, Z17, Z17
	VPMAXUD      Z29, Z25, Z25
	VPMAXUD      Z25, Z17, Z17
	VPMAXUD      (DX), Z17, Z17
	VMOVDQU32    Z17, (DX)

	ADDQ $64, SI
	ADDQ $1024, DI
	DECQ R9
	JNZ  block
	VZEROUPPER
	RET

// func fp4PackNVAVX512(t *[256]float32, s, inv *[16]float32, r *fp4Batch)
TEXT ·fp4PackNVAVX512(SB), NOSPLIT, $0-32
	MOVQ t+0(FP), SI
	MOVQ s+8(FP), AX
	MOVQ inv+16(FP), BX
	MOVQ r+24(FP), DI
	FP4CONSTS
	VMOVUPS (AX), Z30
	VMOVUPS (BX), Z0
	VPXORD  Z17, Z17, Z17
	VPXORD  Z16, Z16, Z16
	NVLANE(0, Z15, Z11, nv0a, nv0b)
	NVLANE(1, Z14, Z10, nv1a, nv1b)
	TREE1
	NVLANE(2, Z15, Z11, nv2a, nv2b)
	NVLANE(3, Z14, Z10, nv3a, nv3b)
	TREE3
	NVLANE(4, Z15, Z11, nv4a, nv4b)
	NVLANE(5, Z14, Z10, nv5a, nv5b)
	TREE5
	NVLANE(6, Z15, Z11, nv6a, nv6b)
	NVLANE(7, Z14, Z10, nv7a, nv7b)
	TREE7
	FP4STORE
	VZEROUPPER
	RET

// func fp4PackMXAVX512(t *[512]float32, s, inv *[16]float32, r *fp4Batch)
TEXT ·fp4PackMXAVX512(SB), NOSPLIT, $0-32
	MOVQ t+0(FP), SI
	MOVQ s+8(FP), BX
	MOVQ inv+16(FP), AX
	MOVQ r+24(FP), DI
	FP4CONSTS
	VMOVUPS (BX), Z30
	MXLANE(0, Z15, Z11)
	MXLANE(1, Z14, Z10)
	TREE1
	MXLANE(2, Z15, Z11)
	MXLANE(3, Z14, Z10)
	TREE3
	MXLANE(4, Z15, Z11)
	MXLANE(5, Z14, Z10)
	TREE5
	MXLANE(6, Z15, Z11)
	MXLANE(7, Z14, Z10)
	TREE7
	FP4STORE
	VZEROUPPER
	RET

// func fp4StatsAVX512(r *fp4Batch, st *[16]GroupStats)
//
// Writes the sixteen groups' statistics: GroupStats{ss, err, rtn, clip} of lane l to st[l],
// the 4×16 block of r's fields transposed by interleaves and 128-bit lane exchanges.
TEXT ·fp4StatsAVX512(SB), NOSPLIT, $0-16
	MOVQ       r+0(FP), SI
	MOVQ       st+8(FP), DI
	VMOVUPS    128(SI), Z0
	VMOVUPS    0(SI), Z1
	VMOVUPS    64(SI), Z2
	VMOVUPS    192(SI), Z3
	VUNPCKLPS  Z1, Z0, Z4
	VUNPCKHPS  Z1, Z0, Z5
	VUNPCKLPS  Z3, Z2, Z6
	VUNPCKHPS  Z3, Z2, Z7
	VUNPCKLPD  Z6, Z4, Z0
	VUNPCKHPD  Z6, Z4, Z1
	VUNPCKLPD  Z7, Z5, Z2
	VUNPCKHPD  Z7, Z5, Z3
	VSHUFF32X4 $0x44, Z1, Z0, Z4
	VSHUFF32X4 $0xee, Z1, Z0, Z5
	VSHUFF32X4 $0x44, Z3, Z2, Z6
	VSHUFF32X4 $0xee, Z3, Z2, Z7
	VSHUFF32X4 $0x88, Z6, Z4, Z0
	VSHUFF32X4 $0xdd, Z6, Z4, Z1
	VSHUFF32X4 $0x88, Z7, Z5, Z2
	VSHUFF32X4 $0xdd, Z7, Z5, Z3
	VMOVUPS    Z0, 0(DI)
	VMOVUPS    Z1, 64(DI)
	VMOVUPS    Z2, 128(DI)
	VMOVUPS    Z3, 192(DI)
	VZEROUPPER
	RET
