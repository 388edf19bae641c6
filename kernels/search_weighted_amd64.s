//go:build goexperiment.simd && amd64

#include "go_asm.h"
#include "textflag.h"
#include "search_amd64.h"

// The weighted search's loops (int4weighted_avx512.go): its sums, its plain and coarse
// candidates and its fine stage; search_amd64.h says how they keep the specification's bits.

// WSUMSTERM adds row off(BX)'s terms, with the weight w at off(R10), to the accumulators E
// (w·(d·d)), X ((w·x)·q), Q ((w·q)·q) and U (d·d): F sets f (x·inv or x/s), clamped to
// [-8, 7] and rounded to the level q.
#define WSUMSTERM(off, E, X, Q, U, F) \
	VMOVUPS      off(BX), Z28; \
	VMOVUPS      off(R10), Z20; \
	F; \
	VMAXPS       Z18, Z29, Z29; \
	VMINPS       Z19, Z29, Z29; \
	VRNDSCALEPS  $0, Z29, Z29; \
	VMULPS       Z28, Z20, Z21; \
	VMULPS       Z29, Z21, Z21; \
	VADDPS       Z21, X, X; \
	VMULPS       Z29, Z20, Z22; \
	VMULPS       Z29, Z22, Z22; \
	VADDPS       Z22, Q, Q; \
	VFNMADD231PS Z16, Z29, Z28; \
	VMULPS       Z28, Z28, Z28; \
	VADDPS       Z28, U, U; \
	VMULPS       Z28, Z20, Z23; \
	VADDPS       Z23, E, E

#define FMUL VMULPS Z17, Z28, Z29
#define FDIV VDIVPS Z16, Z28, Z29

// WSUMSHALF sums the rows j with j%8 in {base/64, ..., base/64+3} of the CX rows from DI
// (weights from SI) into Z0-Z15 (E Z0-Z3, X Z4-Z7, Q Z8-Z11, U Z12-Z15), zeroed first, and
// leaves (a0+a1)+(a2+a3) of each sum in Z0, Z4, Z8 and Z12.
#define WSUMSHALF(name, base, F) \
	VPXORD    Z0, Z0, Z0; \
	VMOVDQU32 Z0, Z1; \
	VMOVDQU32 Z0, Z2; \
	VMOVDQU32 Z0, Z3; \
	VMOVDQU32 Z0, Z4; \
	VMOVDQU32 Z0, Z5; \
	VMOVDQU32 Z0, Z6; \
	VMOVDQU32 Z0, Z7; \
	VMOVDQU32 Z0, Z8; \
	VMOVDQU32 Z0, Z9; \
	VMOVDQU32 Z0, Z10; \
	VMOVDQU32 Z0, Z11; \
	VMOVDQU32 Z0, Z12; \
	VMOVDQU32 Z0, Z13; \
	VMOVDQU32 Z0, Z14; \
	VMOVDQU32 Z0, Z15; \
	LEAQ      base(DI), BX; \
	LEAQ      base(SI), R10; \
	MOVQ      CX, R9; \
name: \
	WSUMSTERM(0, Z0, Z4, Z8, Z12, F); \
	WSUMSTERM(64, Z1, Z5, Z9, Z13, F); \
	WSUMSTERM(128, Z2, Z6, Z10, Z14, F); \
	WSUMSTERM(192, Z3, Z7, Z11, Z15, F); \
	ADDQ      $512, BX; \
	ADDQ      $512, R10; \
	SUBQ      $8, R9; \
	JNZ       name; \
	VADDPS    Z1, Z0, Z0; \
	VADDPS    Z3, Z2, Z2; \
	VADDPS    Z2, Z0, Z0; \
	VADDPS    Z5, Z4, Z4; \
	VADDPS    Z7, Z6, Z6; \
	VADDPS    Z6, Z4, Z4; \
	VADDPS    Z9, Z8, Z8; \
	VADDPS    Z11, Z10, Z10; \
	VADDPS    Z10, Z8, Z8; \
	VADDPS    Z13, Z12, Z12; \
	VADDPS    Z15, Z14, Z14; \
	VADDPS    Z14, Z12, Z12

// WSUMS runs both halves and stores the sums, the first half's plus the second's, into st.
#define WSUMS(n1, n2, F) \
	WSUMSHALF(n1, 0, F); \
	VMOVAPS   Z0, Z24; \
	VMOVAPS   Z4, Z25; \
	VMOVAPS   Z8, Z26; \
	VMOVAPS   Z12, Z27; \
	WSUMSHALF(n2, 256, F); \
	VADDPS    Z0, Z24, Z24; \
	VADDPS    Z4, Z25, Z25; \
	VADDPS    Z8, Z26, Z26; \
	VADDPS    Z12, Z27, Z27; \
	VMOVUPS   Z24, searchState_e(R8); \
	VMOVUPS   Z25, searchState_xq(R8); \
	VMOVUPS   Z26, searchState_qq(R8); \
	VMOVUPS   Z27, searchState_eu(R8)

// func wSumsAsm(t, tw *float32, rows int, div bool, st *searchState)
//
// wSums16: for the scale st.s of each lane, the weighted sums Σw·(x−q·s)², Σw·x·q and Σw·q² of
// its group (rows of t, a multiple of 8, weights tw) and the unweighted Σ(x−q·s)², with
// q = level(x/s) when div, else level(x·(1/s)), into st.e, st.xq, st.qq and st.eu.
TEXT ·wSumsAsm(SB), NOSPLIT, $0-40
	MOVQ t+0(FP), DI
	MOVQ tw+8(FP), SI
	MOVQ rows+16(FP), CX
	MOVQ st+32(FP), R8

	VMOVUPS      searchState_s(R8), Z16 // s
	MOVL         $0x3f800000, AX
	VPBROADCASTD AX, Z17
	VDIVPS       Z16, Z17, Z17 // inv = 1/s
	MOVL         $0xc1000000, AX
	VPBROADCASTD AX, Z18 // -8
	MOVL         $0x40e00000, AX
	VPBROADCASTD AX, Z19 // 7
	MOVBLZX      div+24(FP), AX
	TESTL        AX, AX
	JNZ          wsumsdiv
	WSUMS(wsmulA, wsmulB, FMUL)
	VZEROUPPER
	RET

wsumsdiv:
	WSUMS(wsdivA, wsdivB, FDIV)
	VZEROUPPER
	RET

// func wSearchPosAsm(t, tw *float32, rows int, pos *float32, npos int, lanes uint32, st *searchState)
//
// searchPosAsm for searchBatchWeighted: the candidates pos[:npos] (its plain or its coarse
// ones) in the lanes of lanes, each candidate's weighted error (wErr: the rows of t, weights
// tw) replacing st.bestE, and s st.best, where strictly smaller; those lanes are or-ed into
// st.mul and take k as st.kBest.
TEXT ·wSearchPosAsm(SB), NOSPLIT, $0-56
	MOVQ  t+0(FP), DI
	MOVQ  tw+8(FP), SI
	MOVQ  rows+16(FP), CX
	MOVQ  pos+24(FP), R11
	MOVQ  npos+32(FP), DX
	MOVL  lanes+40(FP), AX
	KMOVW AX, K1
	MOVQ  st+48(FP), R8

	VMOVUPS searchState_a(R8), Z16    // a
	VMOVUPS searchState_sR(R8), Z17   // sR
	VMOVUPS searchState_bestE(R8), Z19  // bestE
	VMOVUPS searchState_best(R8), Z20  // best
	VMOVUPS searchState_kBest(R8), Z31  // kBest
	VPXORD  Z18, Z18, Z18 // prev
	CONSTS
	BF16CONSTS
	KXORW        K7, K7, K7 // the lanes that take a candidate

wcand:
	VMULPS.BCST (R11), Z16, Z29
	ROUNDBF16
	VCMPPS      $4, Z18, Z29, K2     // s != prev
	VCMPPS      $4, Z17, Z29, K2, K2 // and s != sR
	VMOVAPS     Z29, K2, Z18         // prev = s where kept
	KANDW       K1, K2, K2
	KORTESTW    K2, K2
	JZ          wnext
	PREP
	DISPATCH(v00, v01, v1x)

v00:
	WERRLOOP(vloop00, vloop00s, NOCLAMP, NOCLAMP, vchoose)

v01:
	WERRLOOP(vloop01, vloop01s, NOCLAMP, CLAMPHI, vchoose)

v1x:
	KORTESTW K4, K4
	JNZ      v11
	WERRLOOP(vloop10, vloop10s, CLAMPLO, NOCLAMP, vchoose)

v11:
	WERRLOOP(vloop11, vloop11s, CLAMPLO, CLAMPHI, vchoose)

vchoose:
	VCMPPS         $1, Z19, Z0, K2, K5 // kept and e < bestE
	VMOVAPS        Z0, K5, Z19
	VMOVAPS        Z29, K5, Z20
	VBROADCASTSS   (R11), Z8
	VMOVAPS        Z8, K5, Z31
	KORW           K5, K7, K7

wnext:
	ADDQ $4, R11
	DECQ DX
	JNZ  wcand

	VMOVUPS Z19, searchState_bestE(R8)
	VMOVUPS Z20, searchState_best(R8)
	VMOVUPS Z31, searchState_kBest(R8)
	KMOVW   K7, AX
	ORL     AX, searchState_mul(R8)
	VZEROUPPER
	RET

// func wFineAsm(t, tw *float32, rows int, wfine *float32, n int, lanes uint32, st *searchState)
//
// The fine stage of searchBatchWeighted in the lanes of lanes: for i = 1..n, step = i·WFine
// (*wfine; the vector conversion and product of the Go loop), the candidates bf16(a·k) for
// k = kBest − step, then kBest + step (kBest from wSearchPosAsm), each tried where it is
// positive and differs from the lane's current best and from sR: its weighted error replaces
// st.bestE, and s st.best, where strictly smaller, and those lanes are or-ed into st.mul.
// n > 0.
TEXT ·wFineAsm(SB), NOSPLIT, $0-56
	MOVQ  t+0(FP), DI
	MOVQ  tw+8(FP), SI
	MOVQ  rows+16(FP), CX
	MOVQ  wfine+24(FP), R11
	MOVQ  n+32(FP), DX
	MOVL  lanes+40(FP), AX
	KMOVW AX, K1
	MOVQ  st+48(FP), R8

	VMOVUPS searchState_a(R8), Z16   // a
	VMOVUPS searchState_sR(R8), Z17  // sR
	VMOVUPS searchState_bestE(R8), Z19 // bestE
	VMOVUPS searchState_best(R8), Z20 // best
	VMOVUPS searchState_kBest(R8), Z31 // kBest
	VPXORD  Z12, Z12, Z12
	CONSTS
	BF16CONSTS
	KXORW        K7, K7, K7
	MOVQ         $1, R12 // i

fstep:
	VPBROADCASTD R12, Z18
	VCVTDQ2PS    Z18, Z18
	VMULPS.BCST  (R11), Z18, Z18 // step = i·WFine
	VSUBPS       Z18, Z31, Z10   // kBest − step first
	XORQ         R13, R13

ftry:
	VMULPS   Z10, Z16, Z29
	ROUNDBF16
	VCMPPS   $0x1e, Z12, Z29, K1, K2 // lanes where s > 0
	VCMPPS   $4, Z20, Z29, K2, K2    // and s != best
	VCMPPS   $4, Z17, Z29, K2, K2    // and s != sR
	KORTESTW K2, K2
	JZ       fnext
	PREP
	DISPATCH(f00, f01, f1x)

f00:
	WERRLOOP(floop00, floop00s, NOCLAMP, NOCLAMP, fchoose)

f01:
	WERRLOOP(floop01, floop01s, NOCLAMP, CLAMPHI, fchoose)

f1x:
	KORTESTW K4, K4
	JNZ      f11
	WERRLOOP(floop10, floop10s, CLAMPLO, NOCLAMP, fchoose)

f11:
	WERRLOOP(floop11, floop11s, CLAMPLO, CLAMPHI, fchoose)

fchoose:
	VCMPPS  $1, Z19, Z0, K2, K5 // tried and e < bestE
	VMOVAPS Z0, K5, Z19
	VMOVAPS Z29, K5, Z20
	KORW    K5, K7, K7

fnext:
	TESTQ  R13, R13
	JNZ    fiter
	MOVQ   $1, R13
	VADDPS Z18, Z31, Z10 // then kBest + step
	JMP    ftry

fiter:
	INCQ R12
	CMPQ R12, DX
	JLE  fstep

	VMOVUPS Z19, searchState_bestE(R8)
	VMOVUPS Z20, searchState_best(R8)
	KMOVW   K7, AX
	ORL     AX, searchState_mul(R8)
	VZEROUPPER
	RET
