//go:build goexperiment.simd && amd64

#include "go_asm.h"
#include "textflag.h"

// The candidate loops and the error sums of the batched INT4 searches (search16_avx512.go,
// int4weighted_avx512.go) in assembly: sixteen groups transposed, lane l of each row being
// group l, the specification's eight per-group sums in eight accumulators Z0-Z7 (row j goes to
// accumulator j%8), combined as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)). Every lane performs the
// scalar operations of errMul (errDiv, errSumsMul, wSums) in the scalar order, with one step that
// takes another road to the same bits: x − q·s is one VFNMADD231PS. q is an integer in [-8, 7]
// and s a BF16 value: q·s has at most 12 significant bits, all at or above s's last one (a
// multiple of 2^-133), so the scalar product fl(q·s) is exact, unless it overflows. Then
// |q·s| > 2^128 − 2^103 while |x| ≤ 2^128 − 2^104, so |x − q·s| ≥ 2^103 and its square is +Inf
// both ways (the scalar d is ±Inf). Every d·d, and so every error, is the scalar one (NaN where
// the scalar one is NaN: an error that is NaN is never chosen nor stored). Rounding to a
// level is VRNDSCALEPS $0 (nearest, ties to even), as level16; the clamps at -8 and 7 are left
// out of a candidate's loop where no lane of the candidate needs them, by the bounds of
// clamps_simd.go. The refinement sums (errSumsAsm, wSumsAsm) always clamp.

// Registers: Z0-Z7 the accumulators, Z8 and Z9 temporaries, Z16 the groups' absolute maxima,
// Z21 1.0, Z22 and Z23 the bounds -8 and 7, Z27 8.5, Z28 7.5, Z29 the candidate scale s, Z30
// its reciprocal 1/s (VDIVPS: the IEEE quotient).

// ERRTERM adds the error term of row off(BX) to acc: f = x·inv, the clamps CLO and CHI (or
// none), the level q, d = x − q·s, acc += d·d.
#define ERRTERM(off, acc, CLO, CHI) \
	VMOVUPS      off(BX), Z8; \
	VMULPS       Z30, Z8, Z9; \
	CLO; \
	CHI; \
	VRNDSCALEPS  $0, Z9, Z9; \
	VFNMADD231PS Z29, Z9, Z8; \
	VMULPS       Z8, Z8, Z8; \
	VADDPS       Z8, acc, acc

// ERRTERM0 is ERRTERM for the first row of acc: acc = d·d, which is 0 + d·d (d·d is +0 or
// more, or NaN).
#define ERRTERM0(off, acc, CLO, CHI) \
	VMOVUPS      off(BX), Z8; \
	VMULPS       Z30, Z8, Z9; \
	CLO; \
	CHI; \
	VRNDSCALEPS  $0, Z9, Z9; \
	VFNMADD231PS Z29, Z9, Z8; \
	VMULPS       Z8, Z8, acc

// WERRTERM is ERRTERM with the weight of the row at off(R10): acc += w·(d·d).
#define WERRTERM(off, acc, CLO, CHI) \
	VMOVUPS      off(BX), Z8; \
	VMULPS       Z30, Z8, Z9; \
	CLO; \
	CHI; \
	VRNDSCALEPS  $0, Z9, Z9; \
	VFNMADD231PS Z29, Z9, Z8; \
	VMULPS       Z8, Z8, Z8; \
	VMULPS       off(R10), Z8, Z8; \
	VADDPS       Z8, acc, acc

// WERRTERM0 is WERRTERM for the first row of acc: acc = w·(d·d) in place of 0 + w·(d·d),
// which differs at most in the sign of a zero (w·(d·d) = -0 for w < 0 and d = 0): the sums
// differ at most in the sign of a zero then, which no comparison of errors sees, and the
// weighted errors are only compared.
#define WERRTERM0(off, acc, CLO, CHI) \
	VMOVUPS      off(BX), Z8; \
	VMULPS       Z30, Z8, Z9; \
	CLO; \
	CHI; \
	VRNDSCALEPS  $0, Z9, Z9; \
	VFNMADD231PS Z29, Z9, Z8; \
	VMULPS       Z8, Z8, Z8; \
	VMULPS       off(R10), Z8, acc

#define CLAMPLO VMAXPS Z22, Z9, Z9
#define CLAMPHI VMINPS Z23, Z9, Z9
#define NOCLAMP

// TREE leaves ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)) in Z0.
#define TREE \
	VADDPS Z1, Z0, Z0; \
	VADDPS Z3, Z2, Z2; \
	VADDPS Z2, Z0, Z0; \
	VADDPS Z5, Z4, Z4; \
	VADDPS Z7, Z6, Z6; \
	VADDPS Z6, Z4, Z4; \
	VADDPS Z4, Z0, Z0

// ERRLOOP sums the error of the candidate in Z29/Z30 over the CX rows (a multiple of 8) from
// DI into Z0, then jumps to done: the first eight rows set the accumulators, the others add.
#define ERRLOOP(name, sum, CLO, CHI, done) \
	MOVQ DI, BX; \
	ERRTERM0(0, Z0, CLO, CHI); \
	ERRTERM0(64, Z1, CLO, CHI); \
	ERRTERM0(128, Z2, CLO, CHI); \
	ERRTERM0(192, Z3, CLO, CHI); \
	ERRTERM0(256, Z4, CLO, CHI); \
	ERRTERM0(320, Z5, CLO, CHI); \
	ERRTERM0(384, Z6, CLO, CHI); \
	ERRTERM0(448, Z7, CLO, CHI); \
	LEAQ -8(CX), R9; \
	TESTQ R9, R9; \
	JZ   sum; \
name: \
	ADDQ $512, BX; \
	ERRTERM(0, Z0, CLO, CHI); \
	ERRTERM(64, Z1, CLO, CHI); \
	ERRTERM(128, Z2, CLO, CHI); \
	ERRTERM(192, Z3, CLO, CHI); \
	ERRTERM(256, Z4, CLO, CHI); \
	ERRTERM(320, Z5, CLO, CHI); \
	ERRTERM(384, Z6, CLO, CHI); \
	ERRTERM(448, Z7, CLO, CHI); \
	SUBQ $8, R9; \
	JNZ  name; \
sum: \
	TREE; \
	JMP  done

// WERRLOOP is ERRLOOP for the weighted error, the weights' rows from SI.
#define WERRLOOP(name, sum, CLO, CHI, done) \
	MOVQ DI, BX; \
	MOVQ SI, R10; \
	WERRTERM0(0, Z0, CLO, CHI); \
	WERRTERM0(64, Z1, CLO, CHI); \
	WERRTERM0(128, Z2, CLO, CHI); \
	WERRTERM0(192, Z3, CLO, CHI); \
	WERRTERM0(256, Z4, CLO, CHI); \
	WERRTERM0(320, Z5, CLO, CHI); \
	WERRTERM0(384, Z6, CLO, CHI); \
	WERRTERM0(448, Z7, CLO, CHI); \
	LEAQ -8(CX), R9; \
	TESTQ R9, R9; \
	JZ   sum; \
name: \
	ADDQ $512, BX; \
	ADDQ $512, R10; \
	WERRTERM(0, Z0, CLO, CHI); \
	WERRTERM(64, Z1, CLO, CHI); \
	WERRTERM(128, Z2, CLO, CHI); \
	WERRTERM(192, Z3, CLO, CHI); \
	WERRTERM(256, Z4, CLO, CHI); \
	WERRTERM(320, Z5, CLO, CHI); \
	WERRTERM(384, Z6, CLO, CHI); \
	WERRTERM(448, Z7, CLO, CHI); \
	SUBQ $8, R9; \
	JNZ  name; \
sum: \
	TREE; \
	JMP  done

// CONSTS loads 1.0, the clamp bounds and the bounds that decide the clamps (PREP).
#define CONSTS \
	MOVL         $0x3f800000, AX; \
	VPBROADCASTD AX, Z21; \
	MOVL         $0xc1000000, AX; \
	VPBROADCASTD AX, Z22; \
	MOVL         $0x40e00000, AX; \
	VPBROADCASTD AX, Z23; \
	MOVL         $0x41080000, AX; \
	VPBROADCASTD AX, Z27; \
	MOVL         $0x40f00000, AX; \
	VPBROADCASTD AX, Z28

// PREP sets, for the scale s in Z29 tried in the lanes K2, Z30 = 1/s, and by the bounds of
// clamps_simd.go K3 = the lanes of K2 where a·inv > 8.5 (the clamp at -8 is needed), K4 those
// where a·inv ≥ 7.5 (the clamp at 7).
#define PREP \
	VDIVPS Z29, Z21, Z30; \
	VMULPS Z30, Z16, Z8; \
	VCMPPS $0x1e, Z27, Z8, K2, K3; \
	VCMPPS $0x1d, Z28, Z8, K2, K4

// DISPATCH jumps to the loop with the clamps K3 and K4 ask for.
#define DISPATCH(l00, l01, l1x) \
	KORTESTW K3, K3; \
	JNZ      l1x; \
	KORTESTW K4, K4; \
	JNZ      l01; \
	JMP      l00

// func searchPosAsm(t *float32, rows int, pos *float32, npos int, ok uint32, st *searchState)
//
// The loop over the positive candidates of searchBatch: for each k of pos, s = bf16(a·k)
// (roundBF16x16), kept in a lane when it differs from the lane's previous kept scale and from
// sR; where a kept lane is in ok, the error of s (errMul) replaces bestE, and s best, when
// strictly smaller, and the lane's bit is set in mul. st holds a, sR, bestE and best on entry;
// bestE, best and mul on return. rows > 0, npos > 0.
TEXT ·searchPosAsm(SB), NOSPLIT, $0-48
	MOVQ  t+0(FP), DI
	MOVQ  rows+8(FP), CX
	MOVQ  pos+16(FP), SI
	MOVQ  npos+24(FP), DX
	MOVL  ok+32(FP), AX
	KMOVW AX, K1
	MOVQ  st+40(FP), R8

	VMOVUPS searchState_a(R8), Z16    // a
	VMOVUPS searchState_sR(R8), Z17   // sR
	VMOVUPS searchState_bestE(R8), Z19  // bestE
	VMOVUPS searchState_best(R8), Z20  // best
	VPXORD  Z18, Z18, Z18 // prev
	CONSTS
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z24
	MOVL         $1, AX
	VPBROADCASTD AX, Z25
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z26
	KXORW        K7, K7, K7 // mul

cand:
	// s = bf16(a·k): b + 0x7fff + (b>>16)&1, the low half cleared
	VMULPS.BCST (SI), Z16, Z29
	VPSRLD      $16, Z29, Z8
	VPANDD      Z25, Z8, Z8
	VPADDD      Z24, Z29, Z29
	VPADDD      Z8, Z29, Z29
	VPANDD      Z26, Z29, Z29
	VCMPPS      $4, Z18, Z29, K2     // s != prev
	VCMPPS      $4, Z17, Z29, K2, K2 // and s != sR
	VMOVAPS     Z29, K2, Z18         // prev = s where kept
	KANDW       K1, K2, K2
	KORTESTW    K2, K2
	JZ          next
	PREP
	DISPATCH(c00, c01, c1x)

c00:
	ERRLOOP(loop00, loop00s, NOCLAMP, NOCLAMP, choose)

c01:
	ERRLOOP(loop01, loop01s, NOCLAMP, CLAMPHI, choose)

c1x:
	KORTESTW K4, K4
	JNZ      c11
	ERRLOOP(loop10, loop10s, CLAMPLO, NOCLAMP, choose)

c11:
	ERRLOOP(loop11, loop11s, CLAMPLO, CLAMPHI, choose)

choose:
	VCMPPS  $1, Z19, Z0, K2, K5 // kept and e < bestE
	VMOVAPS Z0, K5, Z19
	VMOVAPS Z29, K5, Z20
	KORW    K5, K7, K7

next:
	ADDQ $4, SI
	DECQ DX
	JNZ  cand

	VMOVUPS Z19, searchState_bestE(R8)
	VMOVUPS Z20, searchState_best(R8)
	KMOVW   K7, AX
	MOVL    AX, searchState_mul(R8)
	VZEROUPPER
	RET

// SUMSTERM adds row off(BX)'s terms to the accumulators E (d·d), X (x·q) and Q (q·q): f = x·inv
// (DIV: and x/s in the lanes of K1), clamped to [-8, 7], rounded to the level q; x·q and q·q
// before x becomes d = x − q·s.
#define SUMSTERM(off, E, X, Q, DIV) \
	VMOVUPS      off(BX), Z28; \
	VMULPS       Z25, Z28, Z29; \
	DIV; \
	VMAXPS       Z26, Z29, Z29; \
	VMINPS       Z27, Z29, Z29; \
	VRNDSCALEPS  $0, Z29, Z29; \
	VMULPS       Z29, Z28, Z31; \
	VADDPS       Z31, X, X; \
	VMULPS       Z29, Z29, Z30; \
	VADDPS       Z30, Q, Q; \
	VFNMADD231PS Z24, Z29, Z28; \
	VMULPS       Z28, Z28, Z28; \
	VADDPS       Z28, E, E

#define DIVLANES VDIVPS Z24, Z28, K1, Z29
#define NODIV

// SUMSLOOP runs SUMSTERM over the CX rows from DI, then jumps to done.
#define SUMSLOOP(name, DIV, done) \
	MOVQ DI, BX; \
	MOVQ CX, R9; \
name: \
	SUMSTERM(0, Z0, Z8, Z16, DIV); \
	SUMSTERM(64, Z1, Z9, Z17, DIV); \
	SUMSTERM(128, Z2, Z10, Z18, DIV); \
	SUMSTERM(192, Z3, Z11, Z19, DIV); \
	SUMSTERM(256, Z4, Z12, Z20, DIV); \
	SUMSTERM(320, Z5, Z13, Z21, DIV); \
	SUMSTERM(384, Z6, Z14, Z22, DIV); \
	SUMSTERM(448, Z7, Z15, Z23, DIV); \
	ADDQ $512, BX; \
	SUBQ $8, R9; \
	JNZ  name; \
	JMP  done

// TREE8 leaves ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)) of eight accumulators in a0.
#define TREE8(a0, a1, a2, a3, a4, a5, a6, a7) \
	VADDPS a1, a0, a0; \
	VADDPS a3, a2, a2; \
	VADDPS a2, a0, a0; \
	VADDPS a5, a4, a4; \
	VADDPS a7, a6, a6; \
	VADDPS a6, a4, a4; \
	VADDPS a4, a0, a0

// func errSumsAsm(t *float32, rows int, div uint32, st *searchState)
//
// errSums16: for the scale st.s of each lane, the sums Σ(x − q·s)², Σx·q and Σq² of its group
// (rows of t, a multiple of 8) with q = level(x·(1/s)), or level(x/s) in the lanes of div, as
// errSumsMul and errSumsDiv sum them, into st.e, st.xq and st.qq.
TEXT ·errSumsAsm(SB), NOSPLIT, $0-32
	MOVQ  t+0(FP), DI
	MOVQ  rows+8(FP), CX
	MOVL  div+16(FP), AX
	KMOVW AX, K1
	MOVQ  st+24(FP), R8

	VMOVUPS      searchState_s(R8), Z24 // s
	MOVL         $0x3f800000, AX
	VPBROADCASTD AX, Z25
	VDIVPS       Z24, Z25, Z25 // inv = 1/s
	MOVL         $0xc1000000, AX
	VPBROADCASTD AX, Z26 // -8
	MOVL         $0x40e00000, AX
	VPBROADCASTD AX, Z27 // 7
	VPXORD       Z0, Z0, Z0
	VMOVDQU32    Z0, Z1
	VMOVDQU32    Z0, Z2
	VMOVDQU32    Z0, Z3
	VMOVDQU32    Z0, Z4
	VMOVDQU32    Z0, Z5
	VMOVDQU32    Z0, Z6
	VMOVDQU32    Z0, Z7
	VMOVDQU32    Z0, Z8
	VMOVDQU32    Z0, Z9
	VMOVDQU32    Z0, Z10
	VMOVDQU32    Z0, Z11
	VMOVDQU32    Z0, Z12
	VMOVDQU32    Z0, Z13
	VMOVDQU32    Z0, Z14
	VMOVDQU32    Z0, Z15
	VMOVDQU32    Z0, Z16
	VMOVDQU32    Z0, Z17
	VMOVDQU32    Z0, Z18
	VMOVDQU32    Z0, Z19
	VMOVDQU32    Z0, Z20
	VMOVDQU32    Z0, Z21
	VMOVDQU32    Z0, Z22
	VMOVDQU32    Z0, Z23
	KORTESTW     K1, K1
	JNZ          sumsdiv
	SUMSLOOP(sumsmul, NODIV, sumsdone)

sumsdiv:
	SUMSLOOP(sumsdivloop, DIVLANES, sumsdone)

sumsdone:
	TREE8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	TREE8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	TREE8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)
	VMOVUPS Z0, searchState_e(R8)
	VMOVUPS Z8, searchState_xq(R8)
	VMOVUPS Z16, searchState_qq(R8)
	VZEROUPPER
	RET

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
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z24
	MOVL         $1, AX
	VPBROADCASTD AX, Z25
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z26
	KXORW        K7, K7, K7 // the lanes that take a candidate

wcand:
	VMULPS.BCST (R11), Z16, Z29
	VPSRLD      $16, Z29, Z8
	VPANDD      Z25, Z8, Z8
	VPADDD      Z24, Z29, Z29
	VPADDD      Z8, Z29, Z29
	VPANDD      Z26, Z29, Z29
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
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z24
	MOVL         $1, AX
	VPBROADCASTD AX, Z25
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z26
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
	VPSRLD   $16, Z29, Z8
	VPANDD   Z25, Z8, Z8
	VPADDD   Z24, Z29, Z29
	VPADDD   Z8, Z29, Z29
	VPANDD   Z26, Z29, Z29
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

// RTNTERM adds row off(BX)'s terms to the accumulators E ((x − q·s)² with q = level(x/s)) and
// S (x·x).
#define RTNTERM(off, E, S) \
	VMOVUPS      off(BX), Z8; \
	VMULPS       Z8, Z8, Z10; \
	VADDPS       Z10, S, S; \
	VDIVPS       Z29, Z8, Z9; \
	VMAXPS       Z22, Z9, Z9; \
	VMINPS       Z23, Z9, Z9; \
	VRNDSCALEPS  $0, Z9, Z9; \
	VFNMADD231PS Z29, Z9, Z8; \
	VMULPS       Z8, Z8, Z8; \
	VADDPS       Z8, E, E

// func rtnErrAsm(t *float32, rows int, st *searchState)
//
// errDiv16 and sumSq16 in one pass: for the RTN scale st.sR of each lane, the error
// Σ(x − q·s)² of the RTN levels q = level(x/s) into st.e, and Σx² into st.ss, over the rows
// (a multiple of 8) of t.
TEXT ·rtnErrAsm(SB), NOSPLIT, $0-24
	MOVQ t+0(FP), DI
	MOVQ rows+8(FP), CX
	MOVQ st+16(FP), R8

	VMOVUPS      searchState_sR(R8), Z29
	MOVL         $0xc1000000, AX
	VPBROADCASTD AX, Z22 // -8
	MOVL         $0x40e00000, AX
	VPBROADCASTD AX, Z23 // 7
	VPXORD       Z0, Z0, Z0
	VMOVDQU32    Z0, Z1
	VMOVDQU32    Z0, Z2
	VMOVDQU32    Z0, Z3
	VMOVDQU32    Z0, Z4
	VMOVDQU32    Z0, Z5
	VMOVDQU32    Z0, Z6
	VMOVDQU32    Z0, Z7
	VMOVDQU32    Z0, Z11
	VMOVDQU32    Z0, Z12
	VMOVDQU32    Z0, Z13
	VMOVDQU32    Z0, Z14
	VMOVDQU32    Z0, Z15
	VMOVDQU32    Z0, Z16
	VMOVDQU32    Z0, Z17
	VMOVDQU32    Z0, Z18
	MOVQ         DI, BX
	MOVQ         CX, R9

rtnloop:
	RTNTERM(0, Z0, Z11)
	RTNTERM(64, Z1, Z12)
	RTNTERM(128, Z2, Z13)
	RTNTERM(192, Z3, Z14)
	RTNTERM(256, Z4, Z15)
	RTNTERM(320, Z5, Z16)
	RTNTERM(384, Z6, Z17)
	RTNTERM(448, Z7, Z18)
	ADDQ $512, BX
	SUBQ $8, R9
	JNZ  rtnloop

	TREE8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	TREE8(Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18)
	VMOVUPS Z0, searchState_e(R8)
	VMOVUPS Z11, searchState_ss(R8)
	VZEROUPPER
	RET
