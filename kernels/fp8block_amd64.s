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

// func encodeE4M3RowAsm(codes *byte, row *float32, sc *float32, n int)
//
// encodeE4M3RowAVX512's vector part: the first n elements of row (n a positive multiple of 16)
// to e4m3 codes, element j with scale sc[j/128], sixteen a step as encodeE4M3AVX512 does: the
// IEEE division; on the bit pattern a of |x/s| the normal case (a + 0x7ffff + (a>>20)&1, the
// exponent rebased by 120 in the same addition, shifted down by 20); the subnormal case
// (a < 2^-6: the low byte of |x/s|·512 + 1.5·2^23) and the saturated or NaN case
// (a ≥ 448: 0x7e, or 0x7f for NaN) only for the steps that have one; then the sign bit.
// The Go wrapper checks the bounds.
TEXT ·encodeE4M3RowAsm(SB), NOSPLIT, $0-32
	MOVQ codes+0(FP), DI
	MOVQ row+8(FP), SI
	MOVQ sc+16(FP), R8
	MOVQ n+24(FP), CX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	MOVL $1, AX
	VPBROADCASTD AX, Z30
	MOVL $0xc407ffff, AX     // 0x7ffff - 120<<23, mod 2^32
	VPBROADCASTD AX, Z29
	MOVL $0x3c800000, AX     // 2^-6
	VPBROADCASTD AX, Z28
	MOVL $0x43e00000, AX     // 448
	VPBROADCASTD AX, Z27
	MOVL $0x80, AX
	VPBROADCASTD AX, Z26

blk:
	VBROADCASTSS (R8), Z25
	MOVQ $128, DX
	CMPQ CX, DX
	CMOVQLT CX, DX

step:
	VMOVUPS    (SI), Z0
	VDIVPS     Z25, Z0, Z0       // b = x/s
	VPANDD     Z31, Z0, Z1       // a = |b|
	VPSRAD     $20, Z1, Z2
	VPANDD     Z30, Z2, Z2
	VPADDD     Z29, Z1, Z3
	VPADDD     Z2, Z3, Z3
	VPSRAD     $20, Z3, Z3       // the normal code
	VPCMPD     $1, Z28, Z1, K1   // a < 2^-6
	VPCMPD     $5, Z27, Z1, K2   // a ≥ 448
	KORTESTW   K1, K2
	JNZ        rare

sign:
	VPSRAD     $24, Z0, Z4
	VPTERNLOGD $0xf8, Z26, Z4, Z3 // code | (b>>24)&0x80
	VPMOVDB    Z3, X3
	VMOVDQU    X3, (DI)
	ADDQ       $64, SI
	ADDQ       $16, DI
	SUBQ       $16, CX
	SUBQ       $16, DX
	JNZ        step

	ADDQ $4, R8
	TESTQ CX, CX
	JNZ  blk
	VZEROUPPER
	RET

rare:
	// Subnormal lanes: the low byte of a·512 + 1.5·2^23.
	MOVL         $0x44000000, AX   // 512
	VPBROADCASTD AX, Z5
	VMULPS       Z5, Z1, Z5
	MOVL         $0x4b400000, AX   // 1.5·2^23
	VPBROADCASTD AX, Z6
	VADDPS       Z6, Z5, Z5
	VMOVDQA32    Z5, K1, Z3
	// Saturated lanes: 0x7e, NaN 0x7f.
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z6
	VPCMPD       $2, Z6, Z1, K3    // a ≤ +Inf: not NaN
	MOVL         $0x7f, AX
	VPBROADCASTD AX, Z5
	MOVL         $0x7e, AX
	VPBROADCASTD AX, Z6
	VMOVDQA32    Z6, K3, Z5
	VMOVDQA32    Z5, K2, Z3
	JMP          sign

// func fp8ChunkAsm(s *sums512, ref *float32, codes *byte, n int, scales *float32, left, bw int)
//
// errLanesFP8AVX512's chunk: adds ref against the FP8 block dequantization of codes (n
// elements, a positive multiple of 16, at most maxChunk, of one row) to s. scales points at
// the scale of the first element's block, of which left elements remain (left > 0); the
// next blocks have bw elements each (left and bw multiples of 16). Sixteen codes a step are
// decoded as decodeE4M3AVX512 decodes them (the magnitude shifted into a float32 and scaled by
// 2^120, the sign bit, NaN for magnitude 0x7f, then the product with the block's scale,
// rounded once) and go to the sums as two SUMSTEPs of eight.
TEXT ·fp8ChunkAsm(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ ref+8(FP), SI
	MOVQ codes+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ scales+32(FP), R9
	MOVQ left+40(FP), R10
	MOVQ bw+48(FP), R11
	SUMSLOAD
	MOVL $0x7f, AX
	VPBROADCASTD AX, Z20
	MOVL $0x7b800000, AX     // 2^120
	VPBROADCASTD AX, Z21
	MOVL $0x7fc00000, AX     // NaN
	VPBROADCASTD AX, Z22
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z23
	VBROADCASTSS (R9), Z24

fp8block:
	// BX: the elements of this block in this call.
	MOVQ    R10, BX
	CMPQ    CX, BX
	CMOVQLT CX, BX
	SUBQ    BX, CX

fp8codes:
	VPMOVZXBD     (DX), Z16
	VPANDD        Z20, Z16, Z17
	VPSLLD        $20, Z17, Z18
	VMULPS        Z21, Z18, Z18
	VPSLLD        $24, Z16, Z16
	VPTERNLOGD    $0xf8, Z23, Z16, Z18 // | sign
	VPCMPEQD      Z20, Z17, K1
	VMOVDQA32     Z22, K1, Z18
	VMULPS        Z24, Z18, Z18
	VCVTPS2PD     Y18, Z8
	VCVTPS2PD     (SI), Z7
	SUMSTEP
	VEXTRACTF64X4 $1, Z18, Y18
	VCVTPS2PD     Y18, Z8
	VCVTPS2PD     32(SI), Z7
	SUMSTEPAT(64)
	ADDQ          $128, R8
	ADDQ          $64, SI
	ADDQ          $16, DX
	SUBQ          $16, BX
	JNZ           fp8codes

	TESTQ CX, CX
	JZ    fp8done
	ADDQ  $4, R9
	MOVQ  R11, R10
	VBROADCASTSS (R9), Z24
	JMP   fp8block

fp8done:
	SUMSSTORE
	RET
