//go:build goexperiment.simd && amd64

#include "textflag.h"

#include "errsums_amd64.h"

// int4Levels: the sixteen levels nibble-8 as float32.
DATA int4rtnLevels<>+0(SB)/4, $-8.0
DATA int4rtnLevels<>+4(SB)/4, $-7.0
DATA int4rtnLevels<>+8(SB)/4, $-6.0
DATA int4rtnLevels<>+12(SB)/4, $-5.0
DATA int4rtnLevels<>+16(SB)/4, $-4.0
DATA int4rtnLevels<>+20(SB)/4, $-3.0
DATA int4rtnLevels<>+24(SB)/4, $-2.0
DATA int4rtnLevels<>+28(SB)/4, $-1.0
DATA int4rtnLevels<>+32(SB)/4, $0.0
DATA int4rtnLevels<>+36(SB)/4, $1.0
DATA int4rtnLevels<>+40(SB)/4, $2.0
DATA int4rtnLevels<>+44(SB)/4, $3.0
DATA int4rtnLevels<>+48(SB)/4, $4.0
DATA int4rtnLevels<>+52(SB)/4, $5.0
DATA int4rtnLevels<>+56(SB)/4, $6.0
DATA int4rtnLevels<>+60(SB)/4, $7.0
GLOBL int4rtnLevels<>(SB), RODATA|NOPTR, $64

// The shifts that bring nibble j of a word to the low bits of 64-bit lane j.
DATA int4rtnShifts<>+0(SB)/8, $0
DATA int4rtnShifts<>+8(SB)/8, $4
DATA int4rtnShifts<>+16(SB)/8, $8
DATA int4rtnShifts<>+24(SB)/8, $12
DATA int4rtnShifts<>+32(SB)/8, $16
DATA int4rtnShifts<>+40(SB)/8, $20
DATA int4rtnShifts<>+48(SB)/8, $24
DATA int4rtnShifts<>+56(SB)/8, $28
GLOBL int4rtnShifts<>(SB), RODATA|NOPTR, $64

// INT4LUT sets Z14 (levels 0-7) and Z15 (8-15) to the group's values (nibble-8)·s as float64:
// the float32 products of int4LUT, widened; R9 points at s.
#define INT4LUT \
	VBROADCASTSS  (R9), Z13; \
	VMULPS        Z11, Z13, Z13; \
	VCVTPS2PD     Y13, Z14; \
	VEXTRACTF64X4 $1, Z13, Y13; \
	VCVTPS2PD     Y13, Z15

// func int4ChunkAsm(s *sums512, ref *float32, words *uint32, n int, scales *float32, left, gw int)
//
// int4Chunk: adds ref against the dequantized values of n packed words (n > 0, at most
// maxChunk/8) to s, one word (eight elements) a step. scales points at the scale of the first
// word's group, which has left words (left > 0) from the first one on; the others have gw
// each. Each word's eight values are one two-register permute of its group's sixteen values
// by its nibbles (the word broadcast and each lane shifted by 4j). The Go wrapper checks the
// bounds.
TEXT ·int4ChunkAsm(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ ref+8(FP), SI
	MOVQ words+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ scales+32(FP), R9
	MOVQ left+40(FP), R10
	MOVQ gw+48(FP), R11
	SUMSLOAD
	VMOVUPS int4rtnLevels<>(SB), Z11
	VMOVDQU64 int4rtnShifts<>(SB), Z12
	INT4LUT

words:
	TESTQ R10, R10
	JNZ   same
	ADDQ  $4, R9
	MOVQ  R11, R10
	INT4LUT

same:
	DECQ         R10
	VPBROADCASTD (DX), Z8
	VPSRLVQ      Z12, Z8, Z8
	VPERMI2PD    Z15, Z14, Z8
	VCVTPS2PD    (SI), Z7
	SUMSTEP
	ADDQ         $32, SI
	ADDQ         $4, DX
	ADDQ         $64, R8
	DECQ         CX
	JNZ          words

	SUMSSTORE
	RET
