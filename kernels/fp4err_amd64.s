//go:build goexperiment.simd && amd64

#include "textflag.h"
#include "fp4_amd64.h"

// The FP4 candidates' error passes (AVX-512 and AVX2) and the error sums' inner loops, with the
// AVX2 decode of the packed codes. Each function ends with VZEROUPPER; fp4_amd64.go explains them.

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
