// Shared by search_amd64.s and search_weighted_amd64.s (#include).

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
// level is VRNDSCALEPS $0 (nearest, ties to even), as the scalar level; the clamps at -8 and 7 are left
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

// TREE8 leaves ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)) of eight accumulators in a0.
#define TREE8(a0, a1, a2, a3, a4, a5, a6, a7) \
	VADDPS a1, a0, a0; \
	VADDPS a3, a2, a2; \
	VADDPS a2, a0, a0; \
	VADDPS a5, a4, a4; \
	VADDPS a7, a6, a6; \
	VADDPS a6, a4, a4; \
	VADDPS a4, a0, a0

// BF16CONSTS loads the constants of ROUNDBF16 into Z24-Z26.
#define BF16CONSTS \
	MOVL         $0x7fff, AX; \
	VPBROADCASTD AX, Z24; \
	MOVL         $1, AX; \
	VPBROADCASTD AX, Z25; \
	MOVL         $0xffff0000, AX; \
	VPBROADCASTD AX, Z26

// ROUNDBF16 rounds Z29 to BF16 as roundBF16x16 does: b + 0x7fff + (b>>16)&1, the low half
// cleared (Z8 is a temporary).
#define ROUNDBF16 \
	VPSRLD $16, Z29, Z8; \
	VPANDD Z25, Z8, Z8; \
	VPADDD Z24, Z29, Z29; \
	VPADDD Z8, Z29, Z29; \
	VPANDD Z26, Z29, Z29
