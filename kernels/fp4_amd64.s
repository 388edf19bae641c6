//go:build goexperiment.simd && amd64

#include "textflag.h"

// The hand-written parts of the FP4 batches and error sums (fp4_amd64.go explains them): the
// transpose of sixteen (AVX2: eight) groups with their absolute maxima, the candidates' error
// passes and the final pass of NVFP4 and MXFP4 (codes, error, Σx² and clips of the transposed
// groups under their chosen scales), the store of the statistics, and the error sums' inner
// loops. The functions whose names end in AVX2 are VEX-encoded only (they run on CPUs without
// AVX-512); each function ends with VZEROUPPER.

// fp4AsmK: the constant vectors' elements.
DATA fp4AsmK<>+0x00(SB)/4, $0x7fffffff // |x| mask
DATA fp4AsmK<>+0x04(SB)/4, $0x40c08000 // 6 + 2^-6: a ratio above it rounds to a BF16 above 6
DATA fp4AsmK<>+0x08(SB)/4, $0x40c00000 // 6
DATA fp4AsmK<>+0x0c(SB)/4, $0x7f800000 // exponent mask
DATA fp4AsmK<>+0x10(SB)/4, $0x08000000 // 16 << 23
DATA fp4AsmK<>+0x14(SB)/4, $0x3f800000 // 1
DATA fp4AsmK<>+0x18(SB)/4, $0x0b000000 // 22 << 23
DATA fp4AsmK<>+0x1c(SB)/4, $0x80000000 // sign bit
DATA fp4AsmK<>+0x20(SB)/4, $1
DATA fp4AsmK<>+0x24(SB)/4, $0x8020     // (p + 0x8020) & 0xffc0 == 0: p within 32 units of a
DATA fp4AsmK<>+0x28(SB)/4, $0xffc0     // BF16 rounding midpoint
GLOBL fp4AsmK<>(SB), RODATA|NOPTR, $0x2c

// fp4AsmCodes maps the low four bits of the key U + (Emax >> 22) to the E2M1 magnitude index,
// shifted to the top nibble (see fp4_amd64.go).
DATA fp4AsmCodes<>+0x00(SB)/4, $0x20000000 // key 0: 1
DATA fp4AsmCodes<>+0x04(SB)/4, $0x30000000 // 1: 1.5
DATA fp4AsmCodes<>+0x08(SB)/4, $0x40000000 // 2: 2
DATA fp4AsmCodes<>+0x0c(SB)/4, $0x50000000 // 3: 3
DATA fp4AsmCodes<>+0x10(SB)/4, $0x60000000 // 4: 4
DATA fp4AsmCodes<>+0x14(SB)/4, $0x70000000 // 5: 6
DATA fp4AsmCodes<>+0x18(SB)/4, $0
DATA fp4AsmCodes<>+0x1c(SB)/4, $0
DATA fp4AsmCodes<>+0x20(SB)/4, $0
DATA fp4AsmCodes<>+0x24(SB)/4, $0
DATA fp4AsmCodes<>+0x28(SB)/4, $0
DATA fp4AsmCodes<>+0x2c(SB)/4, $0
DATA fp4AsmCodes<>+0x30(SB)/4, $0
DATA fp4AsmCodes<>+0x34(SB)/4, $0
DATA fp4AsmCodes<>+0x38(SB)/4, $0x00000000 // 0xe: 0
DATA fp4AsmCodes<>+0x3c(SB)/4, $0x10000000 // 0xf: 0.5
GLOBL fp4AsmCodes<>(SB), RODATA|NOPTR, $0x40

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

// The final pass. Registers: Z31 |x| mask, Z30 the scales s, Z29 6 + 2^-6, Z28 6, Z27 the
// exponent mask, Z26 16<<23, Z25 1.0, Z24 22<<23, Z23 the code table, Z22 the sign bit, Z21
// ones, Z20 the clip counts, Z16-Z19 the code words, Z8-Z15 the sums, Z1-Z7 scratch.
#define FP4CONSTS \
	VPBROADCASTD fp4AsmK<>+0x00(SB), Z31; \
	VPBROADCASTD fp4AsmK<>+0x04(SB), Z29; \
	VPBROADCASTD fp4AsmK<>+0x08(SB), Z28; \
	VPBROADCASTD fp4AsmK<>+0x0c(SB), Z27; \
	VPBROADCASTD fp4AsmK<>+0x10(SB), Z26; \
	VPBROADCASTD fp4AsmK<>+0x14(SB), Z25; \
	VPBROADCASTD fp4AsmK<>+0x18(SB), Z24; \
	VMOVDQU32    fp4AsmCodes<>(SB), Z23; \
	VPBROADCASTD fp4AsmK<>+0x1c(SB), Z22; \
	VPBROADCASTD fp4AsmK<>+0x20(SB), Z21; \
	VPXORD       Z20, Z20, Z20

// NVRATIO: Z1 = |x| of the row at off(SI), Z2 = |x|/s: the product |x|·(1/s) (Z0 the
// reciprocals), within a few units of the quotient, redone with the IEEE division where a lane
// lies near a BF16 rounding midpoint (only the ratio's BF16 rounding is used).
#define NVRATIO(off, done) \
	VPANDD         off(SI), Z31, Z1; \
	VMULPS         Z0, Z1, Z2; \
	VPADDD.BCST    fp4AsmK<>+0x24(SB), Z2, Z3; \
	VPTESTNMD.BCST fp4AsmK<>+0x28(SB), Z3, K2; \
	KORTESTW       K2, K2; \
	JZ             done; \
	VDIVPS         Z30, Z1, Z2; \
done:

// MXRATIO: the same with |x|·(1/s) (AX: the reciprocals), exact for powers of two.
#define MXRATIO(off) \
	VPANDD off(SI), Z31, Z1; \
	VMULPS (AX), Z1, Z2

// ELEM: from the ratio r in Z2 (|x| in Z1), the clip count, the code shifted into the top
// nibble of the word W (after W >>= 4) and the difference |x| - value·s in Z6.
//   r6 = min(r, 6), E its exponent bits; a = (r6 + C16) - C16 with C16 = E + 16<<23 is r6
//   rounded to BF16 (nearest even: the ulp of C16's binade is BF16's in E's); U = a + C22 with
//   C22 = max(E, 1.0) + 22<<23 rounds a to the E2M1 grid (halves below 2, one significand bit
//   from 2 on, nearest even), v = U - C22 its value; the low four bits of U + (max(E, 1.0)>>22)
//   index the code table.
#define ELEM(off, W) \
	VCMPPS     $0x1e, Z29, Z2, K1; \
	VPADDD     Z21, Z20, K1, Z20; \
	VMINPS     Z28, Z2, Z2; \
	VPANDD     Z27, Z2, Z3; \
	VPADDD     Z26, Z3, Z4; \
	VADDPS     Z4, Z2, Z5; \
	VSUBPS     Z4, Z5, Z5; \
	VPMAXUD    Z25, Z3, Z3; \
	VPADDD     Z24, Z3, Z4; \
	VADDPS     Z4, Z5, Z5; \
	VSUBPS     Z4, Z5, Z6; \
	VPSRLD     $22, Z3, Z3; \
	VPADDD     Z3, Z5, Z3; \
	VPERMD     Z23, Z3, Z3; \
	VPTERNLOGD $0xf8, off(SI), Z22, Z3; \
	VPSRLD     $4, W, W; \
	VPORD      Z3, W, W; \
	VMULPS     Z30, Z6, Z6; \
	VSUBPS     Z6, Z1, Z6

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

// The AVX2 forms, eight groups at once in 256-bit vectors (VEX only: they run on CPUs without
// AVX-512). fp4AsmK8 holds the constants as whole vectors (VEX has no broadcast operands).
#define K8(off, v) \
	DATA fp4AsmK8<>+off+0x00(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x04(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x08(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x0c(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x10(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x14(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x18(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x1c(SB)/4, v

K8(0x000, $0x7fffffff)
K8(0x020, $0x80000000)
K8(0x040, $0x40c08000)
K8(0x060, $0x40c00000)
K8(0x080, $0x7f800000)
K8(0x0a0, $0x08000000)
K8(0x0c0, $0x3f800000)
K8(0x0e0, $0x0b000000)

// The code table of ELEM indexed by the low three bits of the key (0xe, 0xf, 0..5 give 6, 7,
// 0..5: distinct), shifted to the top nibble.
DATA fp4AsmK8<>+0x100(SB)/4, $0x20000000
DATA fp4AsmK8<>+0x104(SB)/4, $0x30000000
DATA fp4AsmK8<>+0x108(SB)/4, $0x40000000
DATA fp4AsmK8<>+0x10c(SB)/4, $0x50000000
DATA fp4AsmK8<>+0x110(SB)/4, $0x60000000
DATA fp4AsmK8<>+0x114(SB)/4, $0x70000000
DATA fp4AsmK8<>+0x118(SB)/4, $0x00000000
DATA fp4AsmK8<>+0x11c(SB)/4, $0x10000000
GLOBL fp4AsmK8<>(SB), RODATA|NOPTR, $0x120

// func fp4TransposeAVX2(dst, src *float32, blocks, stride int, amax *[8]uint32)
//
// fp4TransposeAVX512 for eight groups in column blocks of eight: interleaves of 32-bit, then
// 64-bit elements of row pairs, then the exchange of 128-bit halves.
TEXT ·fp4TransposeAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ blocks+16(FP), R9
	MOVQ stride+24(FP), CX
	MOVQ amax+32(FP), DX
	SHLQ $2, CX
	LEAQ (CX)(CX*2), R8
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (DX)

block8:
	MOVQ    SI, AX
	VMOVUPS (AX), Y0
	VMOVUPS (AX)(CX*1), Y1
	VMOVUPS (AX)(CX*2), Y2
	VMOVUPS (AX)(R8*1), Y3
	LEAQ    (AX)(CX*4), AX
	VMOVUPS (AX), Y4
	VMOVUPS (AX)(CX*1), Y5
	VMOVUPS (AX)(CX*2), Y6
	VMOVUPS (AX)(R8*1), Y7

	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15

	// Y(4G+m), half q = element 4q+m of rows 4G..4G+3.
	VUNPCKLPD Y10, Y8, Y0
	VUNPCKHPD Y10, Y8, Y1
	VUNPCKLPD Y11, Y9, Y2
	VUNPCKHPD Y11, Y9, Y3
	VUNPCKLPD Y14, Y12, Y4
	VUNPCKHPD Y14, Y12, Y5
	VUNPCKLPD Y15, Y13, Y6
	VUNPCKHPD Y15, Y13, Y7

	// Element m (low halves) and 4+m (high halves).
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15

	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y11, 96(DI)
	VMOVUPS Y12, 128(DI)
	VMOVUPS Y13, 160(DI)
	VMOVUPS Y14, 192(DI)
	VMOVUPS Y15, 224(DI)

	VMOVDQU fp4AsmK8<>+0x00(SB), Y0
	VPAND   Y0, Y8, Y8
	VPAND   Y0, Y9, Y9
	VPAND   Y0, Y10, Y10
	VPAND   Y0, Y11, Y11
	VPAND   Y0, Y12, Y12
	VPAND   Y0, Y13, Y13
	VPAND   Y0, Y14, Y14
	VPAND   Y0, Y15, Y15
	VPMAXUD Y9, Y8, Y8
	VPMAXUD Y11, Y10, Y10
	VPMAXUD Y13, Y12, Y12
	VPMAXUD Y15, Y14, Y14
	VPMAXUD Y10, Y8, Y8
	VPMAXUD Y14, Y12, Y12
	VPMAXUD Y12, Y8, Y8
	VPMAXUD (DX), Y8, Y8
	VMOVDQU Y8, (DX)

	ADDQ $32, SI
	ADDQ $256, DI
	DECQ R9
	JNZ  block8
	VZEROUPPER
	RET

// ELEM8: one row of eight groups at off(SI) into the word W: Y0 the scales, Y8 the clip
// counts; leaves |x| in Y2 and |x| - value·s in Y5 (scratch Y1-Y5). The steps of ELEM, with
// vector masks and the ratio by division.
#define ELEM8(off, W) \
	VMOVUPS off(SI), Y1; \
	VANDPS  fp4AsmK8<>+0x00(SB), Y1, Y2; \
	VANDPS  fp4AsmK8<>+0x20(SB), Y1, Y1; \
	VDIVPS  Y0, Y2, Y3; \
	VCMPPS  $0x1e, fp4AsmK8<>+0x40(SB), Y3, Y4; \
	VPSUBD  Y4, Y8, Y8; \
	VMINPS  fp4AsmK8<>+0x60(SB), Y3, Y3; \
	VPAND   fp4AsmK8<>+0x80(SB), Y3, Y4; \
	VPADDD  fp4AsmK8<>+0xa0(SB), Y4, Y5; \
	VADDPS  Y5, Y3, Y3; \
	VSUBPS  Y5, Y3, Y3; \
	VPMAXUD fp4AsmK8<>+0xc0(SB), Y4, Y4; \
	VPADDD  fp4AsmK8<>+0xe0(SB), Y4, Y5; \
	VADDPS  Y5, Y3, Y3; \
	VSUBPS  Y5, Y3, Y5; \
	VPSRLD  $22, Y4, Y4; \
	VPADDD  Y3, Y4, Y4; \
	VPERMD  fp4AsmK8<>+0x100(SB), Y4, Y4; \
	VPOR    Y1, Y4, Y4; \
	VPSRLD  $4, W, W; \
	VPOR    Y4, W, W; \
	VMULPS  Y0, Y5, Y5; \
	VSUBPS  Y5, Y2, Y5

#define FIRST8(E, S) \
	VMULPS Y5, Y5, E; \
	VMULPS Y2, Y2, S

#define NEXT8(E, S) \
	VMULPS Y5, Y5, Y5; \
	VADDPS Y5, E, E; \
	VMULPS Y2, Y2, Y2; \
	VADDPS Y2, S, S

// The tree of the eight lanes: Y13/Y15 lane j even, Y14/Y6 lane j odd; (l0+l1) and then the
// first half at 0(DI) and 128(DI) (the err and ss fields), (l4+l5) at 64(DI) and 96(DI) (the
// rtn field, written later by the caller).
#define TREE8_1 \
	VADDPS  Y14, Y13, Y7; \
	VMOVUPS Y7, 0(DI); \
	VADDPS  Y6, Y15, Y7; \
	VMOVUPS Y7, 128(DI)

#define TREE8_3 \
	VADDPS  Y14, Y13, Y13; \
	VADDPS  0(DI), Y13, Y13; \
	VMOVUPS Y13, 0(DI); \
	VADDPS  Y6, Y15, Y15; \
	VADDPS  128(DI), Y15, Y15; \
	VMOVUPS Y15, 128(DI)

#define TREE8_5 \
	VADDPS  Y14, Y13, Y7; \
	VMOVUPS Y7, 64(DI); \
	VADDPS  Y6, Y15, Y7; \
	VMOVUPS Y7, 96(DI)

#define TREE8_7 \
	VADDPS  Y14, Y13, Y13; \
	VADDPS  64(DI), Y13, Y13; \
	VADDPS  0(DI), Y13, Y13; \
	VMOVUPS Y13, 0(DI); \
	VADDPS  Y6, Y15, Y15; \
	VADDPS  96(DI), Y15, Y15; \
	VADDPS  128(DI), Y15, Y15; \
	VMOVUPS Y15, 128(DI)

#define NVLANE8(j, E, S) \
	ELEM8(32*j, Y9); \
	FIRST8(E, S); \
	ELEM8(32*(j+8), Y10); \
	NEXT8(E, S)

#define MXLANE8(j, E, S) \
	ELEM8(32*j, Y9); \
	FIRST8(E, S); \
	ELEM8(32*(j+8), Y10); \
	NEXT8(E, S); \
	ELEM8(32*(j+16), Y11); \
	NEXT8(E, S); \
	ELEM8(32*(j+24), Y12); \
	NEXT8(E, S)

// FP4STORE8 writes the clip counts and the words W0..W3 (W_i of group l at 256 + 32i + 4l).
#define FP4STORE8 \
	VMOVDQU Y8, 192(DI); \
	VMOVDQU Y9, 256(DI); \
	VMOVDQU Y10, 288(DI); \
	VMOVDQU Y11, 320(DI); \
	VMOVDQU Y12, 352(DI)

// func fp4PackNVAVX2(t *[128]float32, s *[8]float32, r *fp4Batch)
TEXT ·fp4PackNVAVX2(SB), NOSPLIT, $0-24
	MOVQ    t+0(FP), SI
	MOVQ    s+8(FP), AX
	MOVQ    r+16(FP), DI
	VMOVUPS (AX), Y0
	VPXOR   Y8, Y8, Y8
	VPXOR   Y11, Y11, Y11
	VPXOR   Y12, Y12, Y12
	NVLANE8(0, Y13, Y15)
	NVLANE8(1, Y14, Y6)
	TREE8_1
	NVLANE8(2, Y13, Y15)
	NVLANE8(3, Y14, Y6)
	TREE8_3
	NVLANE8(4, Y13, Y15)
	NVLANE8(5, Y14, Y6)
	TREE8_5
	NVLANE8(6, Y13, Y15)
	NVLANE8(7, Y14, Y6)
	TREE8_7
	FP4STORE8
	VZEROUPPER
	RET

// func fp4PackMXAVX2(t *[256]float32, s *[8]float32, r *fp4Batch)
TEXT ·fp4PackMXAVX2(SB), NOSPLIT, $0-24
	MOVQ    t+0(FP), SI
	MOVQ    s+8(FP), AX
	MOVQ    r+16(FP), DI
	VMOVUPS (AX), Y0
	VPXOR   Y8, Y8, Y8
	MXLANE8(0, Y13, Y15)
	MXLANE8(1, Y14, Y6)
	TREE8_1
	MXLANE8(2, Y13, Y15)
	MXLANE8(3, Y14, Y6)
	TREE8_3
	MXLANE8(4, Y13, Y15)
	MXLANE8(5, Y14, Y6)
	TREE8_5
	MXLANE8(6, Y13, Y15)
	MXLANE8(7, Y14, Y6)
	TREE8_7
	FP4STORE8
	VZEROUPPER
	RET

// fp4AsmErr: the sixteen E2M1 values, then the shift of nibble j into lane j of a word
// broadcast to eight 64-bit lanes.
DATA fp4AsmErr<>+0x00(SB)/4, $0.0
DATA fp4AsmErr<>+0x04(SB)/4, $0.5
DATA fp4AsmErr<>+0x08(SB)/4, $1.0
DATA fp4AsmErr<>+0x0c(SB)/4, $1.5
DATA fp4AsmErr<>+0x10(SB)/4, $2.0
DATA fp4AsmErr<>+0x14(SB)/4, $3.0
DATA fp4AsmErr<>+0x18(SB)/4, $4.0
DATA fp4AsmErr<>+0x1c(SB)/4, $6.0
DATA fp4AsmErr<>+0x20(SB)/4, $0x80000000
DATA fp4AsmErr<>+0x24(SB)/4, $-0.5
DATA fp4AsmErr<>+0x28(SB)/4, $-1.0
DATA fp4AsmErr<>+0x2c(SB)/4, $-1.5
DATA fp4AsmErr<>+0x30(SB)/4, $-2.0
DATA fp4AsmErr<>+0x34(SB)/4, $-3.0
DATA fp4AsmErr<>+0x38(SB)/4, $-4.0
DATA fp4AsmErr<>+0x3c(SB)/4, $-6.0
DATA fp4AsmErr<>+0x40(SB)/8, $0
DATA fp4AsmErr<>+0x48(SB)/8, $4
DATA fp4AsmErr<>+0x50(SB)/8, $8
DATA fp4AsmErr<>+0x58(SB)/8, $12
DATA fp4AsmErr<>+0x60(SB)/8, $16
DATA fp4AsmErr<>+0x68(SB)/8, $20
DATA fp4AsmErr<>+0x70(SB)/8, $24
DATA fp4AsmErr<>+0x78(SB)/8, $28
DATA fp4AsmErr<>+0x80(SB)/8, $0x7fffffffffffffff
DATA fp4AsmErr<>+0x88(SB)/8, $-1.0
GLOBL fp4AsmErr<>(SB), RODATA|NOPTR, $0x90

// func fp4ErrChunkAVX512(s *sums512, ab *float64, ref *float32, words *uint32, scales *float32, groups, gw int)
//
// fp4ChunkFull's loop: for each of groups groups (scale scales[k], gw words), the sixteen
// values e2m1·s widened to float64 in Z10, Z11, and for each word its eight values (a
// two-table permute by the nibbles) against eight ref elements: e = g - r, |e| to ab, and
// sr += r·r, se += e·e (rounded product), sa += |e|, dt += r·g, sg += g·g, bm = max(|e|, bm),
// as step512 does, the products of r and g fused (exact in float64).
TEXT ·fp4ErrChunkAVX512(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ ab+8(FP), AX
	MOVQ ref+16(FP), SI
	MOVQ words+24(FP), BX
	MOVQ scales+32(FP), DX
	MOVQ groups+40(FP), CX
	MOVQ gw+48(FP), R8
	VMOVUPD      0(DI), Z1
	VMOVUPD      64(DI), Z2
	VMOVUPD      128(DI), Z3
	VMOVUPD      192(DI), Z4
	VMOVUPD      256(DI), Z5
	VBROADCASTSD fp4AsmErr<>+0x88(SB), Z0
	VMOVDQU64    fp4AsmErr<>+0x40(SB), Z6
	VMOVUPS      fp4AsmErr<>+0x00(SB), Z7
	VPBROADCASTQ fp4AsmErr<>+0x80(SB), Z15

errgroup:
	VBROADCASTSS  (DX), Z8
	VMULPS        Z8, Z7, Z8
	VEXTRACTF64X4 $1, Z8, Y9
	VCVTPS2PD     Y8, Z10
	VCVTPS2PD     Y9, Z11
	MOVQ          R8, R9

errword:
	VPBROADCASTD (BX), Z12
	VPSRLVQ      Z6, Z12, Z12
	VPERMI2PD    Z11, Z10, Z12
	VCVTPS2PD    (SI), Z13
	VSUBPD       Z13, Z12, Z14
	VPANDQ       Z15, Z14, Z16
	VMOVUPD      Z16, (AX)
	VFMADD231PD  Z13, Z13, Z1
	VMULPD       Z14, Z14, Z14
	VADDPD       Z14, Z2, Z2
	VADDPD       Z16, Z3, Z3
	VFMADD231PD  Z12, Z13, Z4
	VFMADD231PD  Z12, Z12, Z5
	VMAXPD       Z0, Z16, Z0
	ADDQ         $32, SI
	ADDQ         $64, AX
	ADDQ         $4, BX
	DECQ         R9
	JNZ          errword
	ADDQ         $4, DX
	DECQ         CX
	JNZ          errgroup

	VMOVUPD Z1, 0(DI)
	VMOVUPD Z2, 64(DI)
	VMOVUPD Z3, 128(DI)
	VMOVUPD Z4, 192(DI)
	VMOVUPD Z5, 256(DI)
	VMOVUPD Z0, 384(DI)
	VZEROUPPER
	RET

// ERRELEM: ELEM's value and difference alone (no codes, no clips), from the ratio in Z2.
#define ERRELEM \
	VMINPS  Z28, Z2, Z2; \
	VPANDD  Z27, Z2, Z3; \
	VPADDD  Z26, Z3, Z4; \
	VADDPS  Z4, Z2, Z5; \
	VSUBPS  Z4, Z5, Z5; \
	VPMAXUD Z25, Z3, Z3; \
	VPADDD  Z24, Z3, Z4; \
	VADDPS  Z4, Z5, Z5; \
	VSUBPS  Z4, Z5, Z6; \
	VMULPS  Z30, Z6, Z6; \
	VSUBPS  Z6, Z1, Z6

#define EFIRST(E) \
	VMULPS Z6, Z6, E

#define ENEXT(E) \
	VMULPS Z6, Z6, Z6; \
	VADDPS Z6, E, E

#define ETREE1 \
	VADDPS Z14, Z15, Z13

#define ETREE3 \
	VADDPS Z14, Z15, Z15; \
	VADDPS Z15, Z13, Z13

#define ETREE5 \
	VADDPS Z14, Z15, Z12

#define ETREE7 \
	VADDPS Z14, Z15, Z15; \
	VADDPS Z15, Z12, Z12; \
	VADDPS Z12, Z13, Z13

#define NVELANE(j, E, d0, d1) \
	NVRATIO(64*j, d0); \
	ERRELEM; \
	EFIRST(E); \
	NVRATIO(64*(j+8), d1); \
	ERRELEM; \
	ENEXT(E)

// MXRATIO0: the ratio with the reciprocals in Z0.
#define MXRATIO0(off) \
	VPANDD off(SI), Z31, Z1; \
	VMULPS Z0, Z1, Z2

#define MXELANE(j, E) \
	MXRATIO0(64*j); \
	ERRELEM; \
	EFIRST(E); \
	MXRATIO0(64*(j+8)); \
	ERRELEM; \
	ENEXT(E); \
	MXRATIO0(64*(j+16)); \
	ERRELEM; \
	ENEXT(E); \
	MXRATIO0(64*(j+24)); \
	ERRELEM; \
	ENEXT(E)

// func fp4ErrNVAVX512(t *[256]float32, s, inv *[16]float32, e *[16]float32)
TEXT ·fp4ErrNVAVX512(SB), NOSPLIT, $0-32
	MOVQ t+0(FP), SI
	MOVQ s+8(FP), AX
	MOVQ inv+16(FP), BX
	MOVQ e+24(FP), DI
	FP4CONSTS
	VMOVUPS (AX), Z30
	VMOVUPS (BX), Z0
	NVELANE(0, Z15, ne0a, ne0b)
	NVELANE(1, Z14, ne1a, ne1b)
	ETREE1
	NVELANE(2, Z15, ne2a, ne2b)
	NVELANE(3, Z14, ne3a, ne3b)
	ETREE3
	NVELANE(4, Z15, ne4a, ne4b)
	NVELANE(5, Z14, ne5a, ne5b)
	ETREE5
	NVELANE(6, Z15, ne6a, ne6b)
	NVELANE(7, Z14, ne7a, ne7b)
	ETREE7
	VMOVUPS Z13, (DI)
	VZEROUPPER
	RET

// func fp4ErrMXAVX512(t *[512]float32, s, inv *[16]float32, e *[16]float32)
TEXT ·fp4ErrMXAVX512(SB), NOSPLIT, $0-32
	MOVQ t+0(FP), SI
	MOVQ s+8(FP), AX
	MOVQ inv+16(FP), BX
	MOVQ e+24(FP), DI
	FP4CONSTS
	VMOVUPS (AX), Z30
	VMOVUPS (BX), Z0
	MXELANE(0, Z15)
	MXELANE(1, Z14)
	ETREE1
	MXELANE(2, Z15)
	MXELANE(3, Z14)
	ETREE3
	MXELANE(4, Z15)
	MXELANE(5, Z14)
	ETREE5
	MXELANE(6, Z15)
	MXELANE(7, Z14)
	ETREE7
	VMOVUPS Z13, (DI)
	VZEROUPPER
	RET

// ERRELEM8: ELEM8's difference alone, |x| - value·s in Y5 (scratch Y1-Y5, Y0 the scales).
#define ERRELEM8(off) \
	VMOVUPS off(SI), Y1; \
	VANDPS  fp4AsmK8<>+0x00(SB), Y1, Y2; \
	VDIVPS  Y0, Y2, Y3; \
	VMINPS  fp4AsmK8<>+0x60(SB), Y3, Y3; \
	VPAND   fp4AsmK8<>+0x80(SB), Y3, Y4; \
	VPADDD  fp4AsmK8<>+0xa0(SB), Y4, Y5; \
	VADDPS  Y5, Y3, Y3; \
	VSUBPS  Y5, Y3, Y3; \
	VPMAXUD fp4AsmK8<>+0xc0(SB), Y4, Y4; \
	VPADDD  fp4AsmK8<>+0xe0(SB), Y4, Y5; \
	VADDPS  Y5, Y3, Y3; \
	VSUBPS  Y5, Y3, Y5; \
	VMULPS  Y0, Y5, Y5; \
	VSUBPS  Y5, Y2, Y5

#define EFIRST8(E) \
	VMULPS Y5, Y5, E

#define ENEXT8(E) \
	VMULPS Y5, Y5, Y5; \
	VADDPS Y5, E, E

// The error tree in Y12-Y15: Y15 lane j even, Y14 odd, Y13 (l0+l1) then the first half, Y12
// (l4+l5) then the second half.
#define ETREE8_1 \
	VADDPS Y14, Y15, Y13

#define ETREE8_3 \
	VADDPS Y14, Y15, Y15; \
	VADDPS Y15, Y13, Y13

#define ETREE8_5 \
	VADDPS Y14, Y15, Y12

#define ETREE8_7 \
	VADDPS Y14, Y15, Y15; \
	VADDPS Y15, Y12, Y12; \
	VADDPS Y12, Y13, Y13

#define NVELANE8(j, E) \
	ERRELEM8(32*j); \
	EFIRST8(E); \
	ERRELEM8(32*(j+8)); \
	ENEXT8(E)

#define MXELANE8(j, E) \
	ERRELEM8(32*j); \
	EFIRST8(E); \
	ERRELEM8(32*(j+8)); \
	ENEXT8(E); \
	ERRELEM8(32*(j+16)); \
	ENEXT8(E); \
	ERRELEM8(32*(j+24)); \
	ENEXT8(E)

// func fp4ErrNVAVX2(t *[128]float32, s *[8]float32, e *[8]float32)
TEXT ·fp4ErrNVAVX2(SB), NOSPLIT, $0-24
	MOVQ    t+0(FP), SI
	MOVQ    s+8(FP), AX
	MOVQ    e+16(FP), DI
	VMOVUPS (AX), Y0
	NVELANE8(0, Y15)
	NVELANE8(1, Y14)
	ETREE8_1
	NVELANE8(2, Y15)
	NVELANE8(3, Y14)
	ETREE8_3
	NVELANE8(4, Y15)
	NVELANE8(5, Y14)
	ETREE8_5
	NVELANE8(6, Y15)
	NVELANE8(7, Y14)
	ETREE8_7
	VMOVUPS Y13, (DI)
	VZEROUPPER
	RET

// func fp4ErrMXAVX2(t *[256]float32, s *[8]float32, e *[8]float32)
TEXT ·fp4ErrMXAVX2(SB), NOSPLIT, $0-24
	MOVQ    t+0(FP), SI
	MOVQ    s+8(FP), AX
	MOVQ    e+16(FP), DI
	VMOVUPS (AX), Y0
	MXELANE8(0, Y15)
	MXELANE8(1, Y14)
	ETREE8_1
	MXELANE8(2, Y15)
	MXELANE8(3, Y14)
	ETREE8_3
	MXELANE8(4, Y15)
	MXELANE8(5, Y14)
	ETREE8_5
	MXELANE8(6, Y15)
	MXELANE8(7, Y14)
	ETREE8_7
	VMOVUPS Y13, (DI)
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

// ERRHALF8: half h of (*sums256).chunk: lanes 4h..4h+3 of every eight elements of ref (SI)
// against got (BX), n elements (CX); |got-ref| to ab (DX). Y0 the |x| mask of float64.
#define ERRHALF8(h, loop, done) \
	VMOVUPD      (32*h)(DI), Y1; \
	VMOVUPD      (64+32*h)(DI), Y2; \
	VMOVUPD      (128+32*h)(DI), Y3; \
	VMOVUPD      (192+32*h)(DI), Y4; \
	VMOVUPD      (256+32*h)(DI), Y5; \
	VBROADCASTSD fp4AsmErr<>+0x88(SB), Y6; \
	MOVQ         $(4*h), AX; \
loop: \
	LEAQ         4(AX), R8; \
	CMPQ         R8, CX; \
	JGT          done; \
	VCVTPS2PD    (SI)(AX*4), Y7; \
	VCVTPS2PD    (BX)(AX*4), Y8; \
	VSUBPD       Y7, Y8, Y9; \
	VANDPD       Y0, Y9, Y10; \
	VMOVUPD      Y10, (DX)(AX*8); \
	VFMADD231PD  Y7, Y7, Y1; \
	VMULPD       Y9, Y9, Y9; \
	VADDPD       Y9, Y2, Y2; \
	VADDPD       Y10, Y3, Y3; \
	VFMADD231PD  Y8, Y7, Y4; \
	VFMADD231PD  Y8, Y8, Y5; \
	VMAXPD       Y6, Y10, Y6; \
	ADDQ         $8, AX; \
	JMP          loop; \
done: \
	VMOVUPD      Y1, (32*h)(DI); \
	VMOVUPD      Y2, (64+32*h)(DI); \
	VMOVUPD      Y3, (128+32*h)(DI); \
	VMOVUPD      Y4, (192+32*h)(DI); \
	VMOVUPD      Y5, (256+32*h)(DI); \
	VMOVUPD      Y6, (320+32*h)(DI)

// func fp4ErrChunkAVX2(s *sums256, ab *float64, ref, got *float32, n int)
//
// (*sums256).chunk of both halves: n elements (a multiple of eight, at most maxChunk).
TEXT ·fp4ErrChunkAVX2(SB), NOSPLIT, $0-40
	MOVQ         s+0(FP), DI
	MOVQ         ab+8(FP), DX
	MOVQ         ref+16(FP), SI
	MOVQ         got+24(FP), BX
	MOVQ         n+32(FP), CX
	VBROADCASTSD fp4AsmErr<>+0x80(SB), Y0
	ERRHALF8(0, eh0, eh0done)
	ERRHALF8(1, eh1, eh1done)
	VZEROUPPER
	RET

// fp4AsmDec: the nibble shifts of eight lanes, the eight E2M1 magnitudes, the sign bit of a
// code.
DATA fp4AsmDec<>+0x00(SB)/4, $0
DATA fp4AsmDec<>+0x04(SB)/4, $4
DATA fp4AsmDec<>+0x08(SB)/4, $8
DATA fp4AsmDec<>+0x0c(SB)/4, $12
DATA fp4AsmDec<>+0x10(SB)/4, $16
DATA fp4AsmDec<>+0x14(SB)/4, $20
DATA fp4AsmDec<>+0x18(SB)/4, $24
DATA fp4AsmDec<>+0x1c(SB)/4, $28
DATA fp4AsmDec<>+0x20(SB)/4, $0.0
DATA fp4AsmDec<>+0x24(SB)/4, $0.5
DATA fp4AsmDec<>+0x28(SB)/4, $1.0
DATA fp4AsmDec<>+0x2c(SB)/4, $1.5
DATA fp4AsmDec<>+0x30(SB)/4, $2.0
DATA fp4AsmDec<>+0x34(SB)/4, $3.0
DATA fp4AsmDec<>+0x38(SB)/4, $4.0
DATA fp4AsmDec<>+0x3c(SB)/4, $6.0
DATA fp4AsmDec<>+0x40(SB)/4, $8
DATA fp4AsmDec<>+0x44(SB)/4, $8
DATA fp4AsmDec<>+0x48(SB)/4, $8
DATA fp4AsmDec<>+0x4c(SB)/4, $8
DATA fp4AsmDec<>+0x50(SB)/4, $8
DATA fp4AsmDec<>+0x54(SB)/4, $8
DATA fp4AsmDec<>+0x58(SB)/4, $8
DATA fp4AsmDec<>+0x5c(SB)/4, $8
GLOBL fp4AsmDec<>(SB), RODATA|NOPTR, $0x60

// func fp4DecodeAVX2(dst *float32, words *uint32, scales *float32, groups, gw int)
//
// expandFP4 of groups groups of gw words each: the codes of a word shifted into eight lanes,
// their magnitudes permuted from the eight grid values (VPERMPS reads the low three bits), the
// sign bit moved in from bit 3, times the group's scale (one float32 rounding).
TEXT ·fp4DecodeAVX2(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    words+8(FP), SI
	MOVQ    scales+16(FP), DX
	MOVQ    groups+24(FP), CX
	MOVQ    gw+32(FP), R8
	VMOVDQU fp4AsmDec<>+0x00(SB), Y0
	VMOVUPS fp4AsmDec<>+0x20(SB), Y1
	VMOVDQU fp4AsmDec<>+0x40(SB), Y2

decgroup:
	VBROADCASTSS (DX), Y3
	MOVQ         R8, R9

decword:
	VPBROADCASTD (SI), Y4
	VPSRLVD      Y0, Y4, Y4
	VPERMPS      Y1, Y4, Y5
	VPAND        Y2, Y4, Y4
	VPSLLD       $28, Y4, Y4
	VPOR         Y4, Y5, Y5
	VMULPS       Y3, Y5, Y5
	VMOVUPS      Y5, (DI)
	ADDQ         $4, SI
	ADDQ         $32, DI
	DECQ         R9
	JNZ          decword
	ADDQ         $4, DX
	DECQ         CX
	JNZ          decgroup
	VZEROUPPER
	RET

// func fp4StatsAVX2(r *fp4Batch, st *[8]GroupStats)
//
// fp4StatsAVX512 for the first eight lanes of r's fields: interleaves, then the exchange of
// 128-bit halves.
TEXT ·fp4StatsAVX2(SB), NOSPLIT, $0-16
	MOVQ       r+0(FP), SI
	MOVQ       st+8(FP), DI
	VMOVUPS    128(SI), Y0
	VMOVUPS    0(SI), Y1
	VMOVUPS    64(SI), Y2
	VMOVUPS    192(SI), Y3
	VUNPCKLPS  Y1, Y0, Y4
	VUNPCKHPS  Y1, Y0, Y5
	VUNPCKLPS  Y3, Y2, Y6
	VUNPCKHPS  Y3, Y2, Y7
	VUNPCKLPD  Y6, Y4, Y0
	VUNPCKHPD  Y6, Y4, Y1
	VUNPCKLPD  Y7, Y5, Y2
	VUNPCKHPD  Y7, Y5, Y3
	VPERM2F128 $0x20, Y1, Y0, Y4
	VPERM2F128 $0x20, Y3, Y2, Y5
	VPERM2F128 $0x31, Y1, Y0, Y6
	VPERM2F128 $0x31, Y3, Y2, Y7
	VMOVUPS    Y4, 0(DI)
	VMOVUPS    Y5, 32(DI)
	VMOVUPS    Y6, 64(DI)
	VMOVUPS    Y7, 96(DI)
	VZEROUPPER
	RET
