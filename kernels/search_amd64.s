//go:build goexperiment.simd && amd64

#include "go_asm.h"
#include "textflag.h"
#include "search_amd64.h"

// The plain search's loops (search16_avx512.go): its candidates, its refinement sums and its
// RTN error; search_amd64.h says how they keep the specification's bits.

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
	BF16CONSTS
	KXORW        K7, K7, K7 // mul

cand:
	// s = bf16(a·k)
	VMULPS.BCST (SI), Z16, Z29
	ROUNDBF16
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
