//go:build goexperiment.simd && amd64

#include "textflag.h"

#include "errsums_amd64.h"

// int4rtnLevels: the sixteen levels nibble-8 as float32.
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

// INT4WORD adds the eight elements of the word wo bytes after DX (ref ro bytes after SI, their
// |got-ref| slot ao bytes after R8): the word broadcast, lane j shifted right by 4j, and its
// values permuted from the group's table.
#define INT4WORD(wo, ro, ao) \
	VPBROADCASTD wo(DX), Z8;     \
	VPSRLVQ      Z12, Z8, Z8;    \
	VPERMI2PD    Z15, Z14, Z8;   \
	VCVTPS2PD    ro(SI), Z7;     \
	SUMSTEPAT(ao)

// func int4ChunkAsm(s *sums512, ref *float32, words *uint32, n int, scales *float32, left, gw int)
//
// int4Chunk: adds ref against the dequantized values of n packed words (n > 0, at most
// maxChunk/8) to s, one word (eight elements) a step. scales points at the scale of the first
// word's group, which has left words (left > 0) from the first one on; the others have gw
// each. Each word's eight values are one two-register permute of its group's sixteen values
// by its nibbles (the word broadcast and each lane shifted by 4j); the words of a group go two
// a step. The Go wrapper checks the bounds.
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

group:
	// BX: the words of this group in this call.
	MOVQ    R10, BX
	CMPQ    CX, BX
	CMOVQLT CX, BX
	SUBQ    BX, CX

twowords:
	SUBQ $2, BX
	JLT  oneword
	INT4WORD(0, 0, 0)
	INT4WORD(4, 32, 64)
	ADDQ $64, SI
	ADDQ $8, DX
	ADDQ $128, R8
	JMP  twowords

oneword:
	ADDQ  $2, BX
	JZ    nextgroup
	INT4WORD(0, 0, 0)
	ADDQ  $32, SI
	ADDQ  $4, DX
	ADDQ  $64, R8

nextgroup:
	TESTQ CX, CX
	JZ    done
	ADDQ  $4, R9
	MOVQ  R11, R10
	INT4LUT
	JMP   group

done:
	SUMSSTORE
	RET

// RTNSTEP quantizes the sixteen elements of V (lanes 0-7 of group a, 8-15 of group b) with the
// scales Z16 as rtnStep does (full false): F = V/s; a clip where F ≥ 7.5 (counted in Z19);
// R = min(F, 7) + 1.5·2^23+8, whose low byte is the nibble; e += (V - (R-(1.5·2^23+8))·s)²
// and ss += V², every product rounded before it is added. V is overwritten.
#define RTNSTEP(V, F, R) \
	VDIVPS     Z16, V, F;        \
	VCMPPS     $13, Z22, F, K1;  \
	VPADDD     Z27, Z19, K1, Z19; \
	VMINPS     Z23, F, F;        \
	VADDPS     Z24, F, R;        \
	VSUBPS     Z24, R, F;        \
	VMULPS     Z16, F, F;        \
	VSUBPS     F, V, F;          \
	VMULPS     F, F, F;          \
	VADDPS     F, Z17, Z17;      \
	VMULPS     V, V, V;          \
	VADDPS     V, Z18, Z18

// EOSUM sets A to the sums of adjacent lanes of A then B (even + odd: lanes 0-7 from A, 8-15
// from B), evenOddSum; Z29 and Z30 hold the even and odd indices, Z28 is clobbered.
#define EOSUM(A, B) \
	VMOVDQA64  A, Z28;      \
	VPERMT2PS  B, Z29, Z28; \
	VPERMT2PS  B, Z30, A;   \
	VADDPS     A, Z28, A

// func rtnPairsAsm(x *float32, dst *byte, size int, scales *[16]float32, out *rtnPairsOut, stats *GroupStats, codes *[16]uint16, scaleOut *byte)
//
// The second pass of rtnBatch16 over its sixteen groups of g elements (g a positive multiple
// of 32, at most 2040, every scale a normal float32 or zero), in pairs (2i, 2i+1) as rtnPair
// takes them: the packed bytes to dst, and per pair out.e[i] and out.ss[i] (the eight-lane
// error and Σx² sums, lanes 0-7 group 2i, 8-15 group 2i+1) and out.clip[i] (the two groups'
// clip counts); then the sixteen groups' GroupStats to stats (the sums reduced as
// rtnBatch16 reduces rtnPair's) and their BF16 codes from codes to scaleOut (32 bytes). Each 32 elements of a pair are four RTNSTEPs (elements 0-7, 8-15, 16-23 and
// 24-31 of both groups, by 128-bit shuffles of the loads) whose results are packed as
// packNibbles32 does. The Go wrapper checks the bounds.
TEXT ·rtnPairsAsm(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ size+16(FP), CX
	MOVQ scales+24(FP), R9
	MOVQ out+32(FP), R10
	MOVL $0x40f00000, AX    // 7.5
	VPBROADCASTD AX, Z22
	MOVL $0x40e00000, AX    // 7
	VPBROADCASTD AX, Z23
	MOVL $0x4b400008, AX    // 1.5·2^23+8
	VPBROADCASTD AX, Z24
	MOVL $0x0b400000, AX    // rtnPackXor
	VPBROADCASTD AX, Z25
	MOVL $1, AX
	VPBROADCASTD AX, Z27
	VMOVDQU32 rtnPackShuffle<>(SB), Y26
	VPXORD  Z28, Z28, Z28
	LEAQ    (CX)(CX*1), R11 // 2g: elements of a pair
	MOVQ    CX, R13
	SHLQ    $6, R13
	ADDQ    SI, R13         // the next batch (16g elements on), prefetched 256 bytes a quad
	XORQ    BX, BX          // pair

pair:
	VBROADCASTSS  (R9)(BX*8), Z16
	VBROADCASTSS  4(R9)(BX*8), Y29
	VINSERTF64X4  $1, Y29, Z16, Z16
	VMOVDQA64     Z28, Z17
	VMOVDQA64     Z28, Z18
	VMOVDQA64     Z28, Z19
	LEAQ          (SI)(CX*4), DX  // group b
	MOVQ          CX, R12
	SHRQ          $1, R12
	ADDQ          DI, R12         // group b's bytes, g/2 on
	XORQ          R8, R8          // element offset within the groups

quad:
	PREFETCHT0  (R13)
	PREFETCHT0  64(R13)
	PREFETCHT0  128(R13)
	PREFETCHT0  192(R13)
	ADDQ        $256, R13
	VMOVUPS     (SI)(R8*4), Z0
	VMOVUPS     (DX)(R8*4), Z1
	VMOVUPS     64(SI)(R8*4), Z2
	VMOVUPS     64(DX)(R8*4), Z3
	VSHUFF32X4  $0x44, Z1, Z0, Z4
	VSHUFF32X4  $0xee, Z1, Z0, Z5
	VSHUFF32X4  $0x44, Z3, Z2, Z6
	VSHUFF32X4  $0xee, Z3, Z2, Z7
	RTNSTEP(Z4, Z8, Z0)
	RTNSTEP(Z5, Z9, Z1)
	RTNSTEP(Z6, Z10, Z2)
	RTNSTEP(Z7, Z11, Z3)
	VPSLLD      $8, Z1, Z1
	VPTERNLOGD  $0x96, Z25, Z1, Z0
	VPSLLD      $16, Z2, Z2
	VPSLLD      $24, Z3, Z3
	VPTERNLOGD  $0x96, Z3, Z2, Z0
	VPSRLQ      $28, Z0, Z1
	VPORQ       Z1, Z0, Z0
	VPMOVQD     Z0, Y0
	VPSHUFB     Y26, Y0, Y0
	MOVQ        R8, AX
	SHRQ        $1, AX
	VMOVDQU     X0, (DI)(AX*1)
	VEXTRACTI128 $1, Y0, X1
	VMOVDQU     X1, (R12)(AX*1)
	ADDQ        $32, R8
	CMPQ        R8, CX
	JLT         quad

	// The pair's sums and clip counts (the clip lanes as bytes, each at most g/8, summed
	// in two halves).
	MOVQ       BX, AX
	SHLQ       $6, AX
	VMOVUPS    Z17, (R10)(AX*1)
	VMOVUPS    Z18, 512(R10)(AX*1)
	VPMOVDB    Z19, X0
	VPSADBW    X28, X0, X0
	MOVQ       BX, AX
	SHLQ       $4, AX
	VMOVDQU    X0, 1024(R10)(AX*1)
	LEAQ       (SI)(R11*4), SI
	LEAQ       (DI)(CX*1), DI
	INCQ       BX
	CMPQ       BX, $8
	JLT        pair

	// The pair sums to one lane per group, as rtnBatch16 reduces rtnPair's: the tree
	// ((p0 p1)(p2 p3))((p4 p5)(p6 p7)) of sums of adjacent lanes, even + odd.
	VMOVDQU32    rtnEvenIdx<>(SB), Z29
	MOVL         $1, AX
	VPBROADCASTD AX, Z30
	VPADDD       Z30, Z29, Z30
	VMOVUPS      0(R10), Z0
	VMOVUPS      64(R10), Z1
	VMOVUPS      128(R10), Z2
	VMOVUPS      192(R10), Z3
	VMOVUPS      256(R10), Z4
	VMOVUPS      320(R10), Z5
	VMOVUPS      384(R10), Z6
	VMOVUPS      448(R10), Z7
	VMOVUPS      512(R10), Z8
	VMOVUPS      576(R10), Z9
	VMOVUPS      640(R10), Z10
	VMOVUPS      704(R10), Z11
	VMOVUPS      768(R10), Z12
	VMOVUPS      832(R10), Z13
	VMOVUPS      896(R10), Z14
	VMOVUPS      960(R10), Z15
	EOSUM(Z0, Z1)
	EOSUM(Z2, Z3)
	EOSUM(Z0, Z2)
	EOSUM(Z4, Z5)
	EOSUM(Z6, Z7)
	EOSUM(Z4, Z6)
	EOSUM(Z0, Z4)
	EOSUM(Z8, Z9)
	EOSUM(Z10, Z11)
	EOSUM(Z8, Z10)
	EOSUM(Z12, Z13)
	EOSUM(Z14, Z15)
	EOSUM(Z12, Z14)
	EOSUM(Z8, Z12)
	// Z0: the errors, Z8: Σx², Z1: the clip counts (groups in order in out.clip).
	VMOVDQU64    1024(R10), Z1
	VPMOVQD      Z1, Y1
	VMOVDQU64    1088(R10), Z2
	VPMOVQD      Z2, Y2
	VINSERTI64X4 $1, Y2, Z1, Z1
	// GroupStats{SumSq, Err, RTNErr: Err, Clipped} of group 4k+j in 128-bit lane k of Rj.
	VPUNPCKLDQ   Z0, Z8, Z2        // ss0 e0 ss1 e1
	VPUNPCKHDQ   Z0, Z8, Z3        // ss2 e2 ss3 e3
	VPUNPCKLDQ   Z1, Z0, Z4        // e0 c0 e1 c1
	VPUNPCKHDQ   Z1, Z0, Z5        // e2 c2 e3 c3
	VPUNPCKLQDQ  Z4, Z2, Z6        // group 4k
	VPUNPCKHQDQ  Z4, Z2, Z7        // 4k+1
	VPUNPCKLQDQ  Z5, Z3, Z8        // 4k+2
	VPUNPCKHQDQ  Z5, Z3, Z9        // 4k+3
	MOVQ         stats+40(FP), DI
	VMOVDQU      X6, 0(DI)
	VMOVDQU      X7, 16(DI)
	VMOVDQU      X8, 32(DI)
	VMOVDQU      X9, 48(DI)
	VEXTRACTI32X4 $1, Z6, 64(DI)
	VEXTRACTI32X4 $1, Z7, 80(DI)
	VEXTRACTI32X4 $1, Z8, 96(DI)
	VEXTRACTI32X4 $1, Z9, 112(DI)
	VEXTRACTI32X4 $2, Z6, 128(DI)
	VEXTRACTI32X4 $2, Z7, 144(DI)
	VEXTRACTI32X4 $2, Z8, 160(DI)
	VEXTRACTI32X4 $2, Z9, 176(DI)
	VEXTRACTI32X4 $3, Z6, 192(DI)
	VEXTRACTI32X4 $3, Z7, 208(DI)
	VEXTRACTI32X4 $3, Z8, 224(DI)
	VEXTRACTI32X4 $3, Z9, 240(DI)
	// The BF16 codes.
	MOVQ         codes+48(FP), SI
	MOVQ         scaleOut+56(FP), DI
	VMOVDQU      (SI), Y0
	VMOVDQU      Y0, (DI)
	VZEROUPPER
	RET

// rtnPackShuffle: byte 4k+i of each 16 bytes to byte 4i+k, in both halves.
DATA rtnPackShuffle<>+0(SB)/8, $0x0d0905010c080400
DATA rtnPackShuffle<>+8(SB)/8, $0x0f0b07030e0a0602
DATA rtnPackShuffle<>+16(SB)/8, $0x0d0905010c080400
DATA rtnPackShuffle<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL rtnPackShuffle<>(SB), RODATA|NOPTR, $32

// The lane indices of the absolute-maximum tree: the even and the odd lanes of two vectors.
DATA rtnEvenIdx<>+0(SB)/4, $0
DATA rtnEvenIdx<>+4(SB)/4, $2
DATA rtnEvenIdx<>+8(SB)/4, $4
DATA rtnEvenIdx<>+12(SB)/4, $6
DATA rtnEvenIdx<>+16(SB)/4, $8
DATA rtnEvenIdx<>+20(SB)/4, $10
DATA rtnEvenIdx<>+24(SB)/4, $12
DATA rtnEvenIdx<>+28(SB)/4, $14
DATA rtnEvenIdx<>+32(SB)/4, $16
DATA rtnEvenIdx<>+36(SB)/4, $18
DATA rtnEvenIdx<>+40(SB)/4, $20
DATA rtnEvenIdx<>+44(SB)/4, $22
DATA rtnEvenIdx<>+48(SB)/4, $24
DATA rtnEvenIdx<>+52(SB)/4, $26
DATA rtnEvenIdx<>+56(SB)/4, $28
DATA rtnEvenIdx<>+60(SB)/4, $30
GLOBL rtnEvenIdx<>(SB), RODATA|NOPTR, $64

// MAXPAIR sets A to the maxima of adjacent lanes of A then B (lanes 0-7 from A, 8-15 from B):
// after four levels of it over sixteen vectors, lane l holds the maximum of vector l. Z29 and
// Z30 are the even and odd indices; Z28 is clobbered.
#define MAXPAIR(A, B) \
	VMOVDQA64  A, Z28;      \
	VPERMT2D   B, Z29, Z28; \
	VPERMT2D   B, Z30, A;   \
	VPMAXUD    Z28, A, A

// func rtnScalesAsm(x *float32, size int, scale *[16]uint16, scales *[16]float32) (ok uint16, full bool)
//
// The first pass of rtnBatch16 over sixteen groups of size elements (a positive multiple of
// 16): the largest |x| bit pattern of each group (an integer maximum, order-free), its RTN
// scale bf16(absmax/7.5) (an IEEE division, then roundBF16x16's rounding) into scales and its
// BF16 code into scale. ok has bit l set when group l's maximum is finite and its scale not
// zero; full reports a subnormal scale among those (rtnPair's full).
TEXT ·rtnScalesAsm(SB), NOSPLIT, $0-35
	MOVQ x+0(FP), SI
	MOVQ size+8(FP), CX
	MOVQ scale+16(FP), DI
	MOVQ scales+24(FP), DX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	LEAQ (CX*4), R8         // group stride in bytes
	LEAQ (R8)(R8*2), R10    // 3 strides
	LEAQ (R8)(R8*4), R11    // 5
	LEAQ (R10)(R8*4), R12   // 7
	LEAQ (SI)(R8*8), R9     // group 8
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	XORQ   BX, BX

absmax:
	VPANDD  (SI)(BX*4), Z31, Z16
	VPMAXUD Z16, Z0, Z0
	LEAQ    (SI)(BX*4), AX
	VPANDD  (AX)(R8*1), Z31, Z16
	VPMAXUD Z16, Z1, Z1
	VPANDD  (AX)(R8*2), Z31, Z16
	VPMAXUD Z16, Z2, Z2
	VPANDD  (AX)(R10*1), Z31, Z16
	VPMAXUD Z16, Z3, Z3
	VPANDD  (AX)(R8*4), Z31, Z16
	VPMAXUD Z16, Z4, Z4
	VPANDD  (AX)(R11*1), Z31, Z16
	VPMAXUD Z16, Z5, Z5
	VPANDD  (AX)(R10*2), Z31, Z16
	VPMAXUD Z16, Z6, Z6
	VPANDD  (AX)(R12*1), Z31, Z16
	VPMAXUD Z16, Z7, Z7
	LEAQ    (R9)(BX*4), AX
	VPANDD  (AX), Z31, Z16
	VPMAXUD Z16, Z8, Z8
	VPANDD  (AX)(R8*1), Z31, Z16
	VPMAXUD Z16, Z9, Z9
	VPANDD  (AX)(R8*2), Z31, Z16
	VPMAXUD Z16, Z10, Z10
	VPANDD  (AX)(R10*1), Z31, Z16
	VPMAXUD Z16, Z11, Z11
	VPANDD  (AX)(R8*4), Z31, Z16
	VPMAXUD Z16, Z12, Z12
	VPANDD  (AX)(R11*1), Z31, Z16
	VPMAXUD Z16, Z13, Z13
	VPANDD  (AX)(R10*2), Z31, Z16
	VPMAXUD Z16, Z14, Z14
	VPANDD  (AX)(R12*1), Z31, Z16
	VPMAXUD Z16, Z15, Z15
	ADDQ    $16, BX
	CMPQ    BX, CX
	JLT     absmax

	VMOVDQU32 rtnEvenIdx<>(SB), Z29
	MOVL      $1, AX
	VPBROADCASTD AX, Z30
	VPADDD    Z30, Z29, Z30     // the odd indices
	MAXPAIR(Z0, Z1)
	MAXPAIR(Z2, Z3)
	MAXPAIR(Z4, Z5)
	MAXPAIR(Z6, Z7)
	MAXPAIR(Z8, Z9)
	MAXPAIR(Z10, Z11)
	MAXPAIR(Z12, Z13)
	MAXPAIR(Z14, Z15)
	MAXPAIR(Z0, Z2)
	MAXPAIR(Z4, Z6)
	MAXPAIR(Z8, Z10)
	MAXPAIR(Z12, Z14)
	MAXPAIR(Z0, Z4)
	MAXPAIR(Z8, Z12)
	MAXPAIR(Z0, Z8)

	// Z0: the sixteen maxima. Finite: below 0x7f800000 (the sign bit is clear).
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z1
	VPCMPD       $1, Z1, Z0, K1
	MOVL         $0x40f00000, AX // 7.5
	VPBROADCASTD AX, Z1
	VDIVPS       Z1, Z0, Z1
	// bf16 rounding: b + 0x7fff + (b>>16)&1, the low 16 bits cleared.
	VPSRLD       $16, Z1, Z2
	MOVL         $1, AX
	VPBROADCASTD AX, Z3
	VPANDD       Z3, Z2, Z2
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z3
	VPADDD       Z3, Z1, Z1
	VPADDD       Z2, Z1, Z1
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z3
	VPANDD       Z3, Z1, Z1
	VMOVUPS      Z1, (DX)
	VPXORD       Z2, Z2, Z2
	VCMPPS       $4, Z2, Z1, K2   // scale != 0
	KANDW        K2, K1, K1
	MOVL         $0x00800000, AX  // 2^-126
	VPBROADCASTD AX, Z2
	VCMPPS       $1, Z2, Z1, K3   // scale < 2^-126
	KANDW        K1, K3, K3
	VPSRLD       $16, Z1, Z1
	VPMOVDW      Z1, Y1
	VMOVDQU      Y1, (DI)
	KMOVW        K1, AX
	MOVW         AX, ok+32(FP)
	KORTESTW     K3, K3
	SETNE        full+34(FP)
	VZEROUPPER
	RET
