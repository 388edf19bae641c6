//go:build goexperiment.simd && amd64

#include "textflag.h"

#include "errsums_amd64.h"

// func pairsChunkAsm(s *sums512, ref, got *float32, n int)
//
// pairsChunk: adds ref against got (n elements, a positive multiple of eight, at most
// maxChunk) to s, eight a step, and leaves the chunk maximum in s.bm and each |got-ref| in
// s.ab. The Go wrapper checks the bounds.
TEXT ·pairsChunkAsm(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), DI
	MOVQ ref+8(FP), SI
	MOVQ got+16(FP), DX
	MOVQ n+24(FP), CX
	SUMSLOAD

pairs:
	VCVTPS2PD (SI), Z7
	VCVTPS2PD (DX), Z8
	SUMSTEP
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $64, R8
	SUBQ $8, CX
	JGT  pairs

	SUMSSTORE
	RET

// func blockRowAbsMaxAsm(acc *[16]uint32, src *float32, stride, rows, nb int)
//
// The maxima pass of the FP8 block quantizer over a row of nb whole blocks (nb > 0), row
// after row, so that memory is read in order: for each of rows rows (rows > 0; the next one
// stride bytes on) and each block b, acc[b] (sixteen lanes, acc pointing at nb of them) takes
// the largest |x| bit patterns of the row's 128 elements of the block. An integer maximum:
// the order does not matter. The Go wrapper checks the bounds.
TEXT ·blockRowAbsMaxAsm(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ rows+24(FP), CX
	MOVQ nb+32(FP), R8
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31

row:
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ R8, R9

block:
	VPANDD  (AX), Z31, Z0
	VPANDD  64(AX), Z31, Z1
	VPANDD  128(AX), Z31, Z2
	VPANDD  192(AX), Z31, Z3
	VPANDD  256(AX), Z31, Z4
	VPANDD  320(AX), Z31, Z5
	VPANDD  384(AX), Z31, Z6
	VPANDD  448(AX), Z31, Z7
	VPMAXUD Z1, Z0, Z0
	VPMAXUD Z3, Z2, Z2
	VPMAXUD Z5, Z4, Z4
	VPMAXUD Z7, Z6, Z6
	VPMAXUD Z2, Z0, Z0
	VPMAXUD Z6, Z4, Z4
	VPMAXUD Z4, Z0, Z0
	VPMAXUD (BX), Z0, Z0
	VMOVDQU32 Z0, (BX)
	ADDQ    $512, AX
	ADDQ    $64, BX
	DECQ    R9
	JNZ     block

	ADDQ DX, SI
	DECQ CX
	JNZ  row

	VZEROUPPER
	RET
