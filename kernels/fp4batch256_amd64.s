//go:build goexperiment.simd && amd64

#include "textflag.h"
#include "fp4_amd64.h"

// The AVX2 FP4 batches, eight groups at once in 256-bit vectors (VEX only: they run on CPUs
// without AVX-512): the transpose, the final pass and the store of the statistics. Each function ends with VZEROUPPER; fp4_amd64.go explains them.

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
