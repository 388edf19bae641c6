//go:build goexperiment.simd && amd64

#include "textflag.h"

// func gemmTileAVX512Asm(kc int, ap, bp, c []float32, ldc int)
//
// The gemmMR×gemmNR (4×32) tile of gemmTileScalar: Z0-Z7 hold the sums t (row i in
// Z(2i), Z(2i+1)), zeroed first; for each p in order, the 32 values of B's packed row p are
// loaded into Z8, Z9 and each sum gets VFMADD231PS with A's packed value broadcast from
// memory ({1to16}): t ← fma(a, b, t), rounded once, as the specification's fma32. The sums
// are then added to C, and VZEROUPPER leaves the upper halves clean for the caller. The Go
// wrapper gemmTileAVX512A checks the slice bounds; kc may be 0.
TEXT ·gemmTileAVX512Asm(SB), NOSPLIT, $0-88
	MOVQ kc+0(FP), CX
	MOVQ ap_base+8(FP), SI
	MOVQ bp_base+32(FP), DI
	MOVQ c_base+56(FP), DX
	MOVQ ldc+80(FP), BX
	SHLQ $2, BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ CX, CX
	JEQ   store

loop:
	VMOVUPS          (DI), Z8
	VMOVUPS          64(DI), Z9
	VFMADD231PS.BCST (SI), Z8, Z0
	VFMADD231PS.BCST (SI), Z9, Z1
	VFMADD231PS.BCST 4(SI), Z8, Z2
	VFMADD231PS.BCST 4(SI), Z9, Z3
	VFMADD231PS.BCST 8(SI), Z8, Z4
	VFMADD231PS.BCST 8(SI), Z9, Z5
	VFMADD231PS.BCST 12(SI), Z8, Z6
	VFMADD231PS.BCST 12(SI), Z9, Z7
	ADDQ             $16, SI
	ADDQ             $128, DI
	DECQ             CX
	JNZ              loop

store:
	VADDPS  (DX), Z0, Z0
	VADDPS  64(DX), Z1, Z1
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	ADDQ    BX, DX
	VADDPS  (DX), Z2, Z2
	VADDPS  64(DX), Z3, Z3
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, 64(DX)
	ADDQ    BX, DX
	VADDPS  (DX), Z4, Z4
	VADDPS  64(DX), Z5, Z5
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	ADDQ    BX, DX
	VADDPS  (DX), Z6, Z6
	VADDPS  64(DX), Z7, Z7
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	VZEROUPPER
	RET
