// The constants and the macros fp4batch512_amd64.s, fp4batch256_amd64.s and fp4err_amd64.s
// share (fp4_amd64.go explains the loops). Each file that includes this gets its own copy of
// the file-local constant tables.

// fp4AsmK: the constant vectors' elements.
DATA fp4AsmK<>+0x00(SB)/4, $0x7fffffff // |x| mask
DATA fp4AsmK<>+0x04(SB)/4, $0x40c08000 // 6 + 2^-6: a ratio above it rounds to a BF16 above 6
DATA fp4AsmK<>+0x08(SB)/4, $0x40c00000 // 6
DATA fp4AsmK<>+0x0c(SB)/4, $0x7f800000 // exponent mask
DATA fp4AsmK<>+0x10(SB)/4, $0x08000000 // 16 << 23
DATA fp4AsmK<>+0x14(SB)/4, $0x3f800000 // 1
DATA fp4AsmK<>+0x18(SB)/4, $0x0b000000 // 22 << 23
DATA fp4AsmK<>+0x1c(SB)/4, $0x80000000 // sign bit
DATA fp4AsmK<>+0x20(SB)/4, $1
DATA fp4AsmK<>+0x24(SB)/4, $0x8020     // (p + 0x8020) & 0xffc0 == 0: p within 32 units of a
DATA fp4AsmK<>+0x28(SB)/4, $0xffc0     // BF16 rounding midpoint
GLOBL fp4AsmK<>(SB), RODATA|NOPTR, $0x2c

// fp4AsmCodes maps the low four bits of the key U + (Emax >> 22) to the E2M1 magnitude index,
// shifted to the top nibble (see fp4_amd64.go).
DATA fp4AsmCodes<>+0x00(SB)/4, $0x20000000 // key 0: 1
DATA fp4AsmCodes<>+0x04(SB)/4, $0x30000000 // 1: 1.5
DATA fp4AsmCodes<>+0x08(SB)/4, $0x40000000 // 2: 2
DATA fp4AsmCodes<>+0x0c(SB)/4, $0x50000000 // 3: 3
DATA fp4AsmCodes<>+0x10(SB)/4, $0x60000000 // 4: 4
DATA fp4AsmCodes<>+0x14(SB)/4, $0x70000000 // 5: 6
DATA fp4AsmCodes<>+0x18(SB)/4, $0
DATA fp4AsmCodes<>+0x1c(SB)/4, $0
DATA fp4AsmCodes<>+0x20(SB)/4, $0
DATA fp4AsmCodes<>+0x24(SB)/4, $0
DATA fp4AsmCodes<>+0x28(SB)/4, $0
DATA fp4AsmCodes<>+0x2c(SB)/4, $0
DATA fp4AsmCodes<>+0x30(SB)/4, $0
DATA fp4AsmCodes<>+0x34(SB)/4, $0
DATA fp4AsmCodes<>+0x38(SB)/4, $0x00000000 // 0xe: 0
DATA fp4AsmCodes<>+0x3c(SB)/4, $0x10000000 // 0xf: 0.5
GLOBL fp4AsmCodes<>(SB), RODATA|NOPTR, $0x40

// The final pass. Registers: Z31 |x| mask, Z30 the scales s, Z29 6 + 2^-6, Z28 6, Z27 the
// exponent mask, Z26 16<<23, Z25 1.0, Z24 22<<23, Z23 the code table, Z22 the sign bit, Z21
// ones, Z20 the clip counts, Z16-Z19 the code words, Z8-Z15 the sums, Z1-Z7 scratch.
#define FP4CONSTS \
	VPBROADCASTD fp4AsmK<>+0x00(SB), Z31; \
	VPBROADCASTD fp4AsmK<>+0x04(SB), Z29; \
	VPBROADCASTD fp4AsmK<>+0x08(SB), Z28; \
	VPBROADCASTD fp4AsmK<>+0x0c(SB), Z27; \
	VPBROADCASTD fp4AsmK<>+0x10(SB), Z26; \
	VPBROADCASTD fp4AsmK<>+0x14(SB), Z25; \
	VPBROADCASTD fp4AsmK<>+0x18(SB), Z24; \
	VMOVDQU32    fp4AsmCodes<>(SB), Z23; \
	VPBROADCASTD fp4AsmK<>+0x1c(SB), Z22; \
	VPBROADCASTD fp4AsmK<>+0x20(SB), Z21; \
	VPXORD       Z20, Z20, Z20

// NVRATIO: Z1 = |x| of the row at off(SI), Z2 = |x|/s: the product |x|·(1/s) (Z0 the
// reciprocals), within a few units of the quotient, redone with the IEEE division where a lane
// lies near a BF16 rounding midpoint (only the ratio's BF16 rounding is used).
#define NVRATIO(off, done) \
	VPANDD         off(SI), Z31, Z1; \
	VMULPS         Z0, Z1, Z2; \
	VPADDD.BCST    fp4AsmK<>+0x24(SB), Z2, Z3; \
	VPTESTNMD.BCST fp4AsmK<>+0x28(SB), Z3, K2; \
	KORTESTW       K2, K2; \
	JZ             done; \
	VDIVPS         Z30, Z1, Z2; \
done:

// ELEM: from the ratio r in Z2 (|x| in Z1), the clip count, the code shifted into the top
// nibble of the word W (after W >>= 4) and the difference |x| - value·s in Z6.
//   r6 = min(r, 6), E its exponent bits; a = (r6 + C16) - C16 with C16 = E + 16<<23 is r6
//   rounded to BF16 (nearest even: the ulp of C16's binade is BF16's in E's); U = a + C22 with
//   C22 = max(E, 1.0) + 22<<23 rounds a to the E2M1 grid (halves below 2, one significand bit
//   from 2 on, nearest even), v = U - C22 its value; the low four bits of U + (max(E, 1.0)>>22)
//   index the code table.
#define ELEM(off, W) \
	VCMPPS     $0x1e, Z29, Z2, K1; \
	VPADDD     Z21, Z20, K1, Z20; \
	VMINPS     Z28, Z2, Z2; \
	VPANDD     Z27, Z2, Z3; \
	VPADDD     Z26, Z3, Z4; \
	VADDPS     Z4, Z2, Z5; \
	VSUBPS     Z4, Z5, Z5; \
	VPMAXUD    Z25, Z3, Z3; \
	VPADDD     Z24, Z3, Z4; \
	VADDPS     Z4, Z5, Z5; \
	VSUBPS     Z4, Z5, Z6; \
	VPSRLD     $22, Z3, Z3; \
	VPADDD     Z3, Z5, Z3; \
	VPERMD     Z23, Z3, Z3; \
	VPTERNLOGD $0xf8, off(SI), Z22, Z3; \
	VPSRLD     $4, W, W; \
	VPORD      Z3, W, W; \
	VMULPS     Z30, Z6, Z6; \
	VSUBPS     Z6, Z1, Z6

// The AVX2 forms, eight groups at once in 256-bit vectors (VEX only: they run on CPUs without
// AVX-512). fp4AsmK8 holds the constants as whole vectors (VEX has no broadcast operands).
#define K8(off, v) \
	DATA fp4AsmK8<>+off+0x00(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x04(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x08(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x0c(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x10(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x14(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x18(SB)/4, v; \
	DATA fp4AsmK8<>+off+0x1c(SB)/4, v

K8(0x000, $0x7fffffff)
K8(0x020, $0x80000000)
K8(0x040, $0x40c08000)
K8(0x060, $0x40c00000)
K8(0x080, $0x7f800000)
K8(0x0a0, $0x08000000)
K8(0x0c0, $0x3f800000)
K8(0x0e0, $0x0b000000)

// The code table of ELEM indexed by the low three bits of the key (0xe, 0xf, 0..5 give 6, 7,
// 0..5: distinct), shifted to the top nibble.
DATA fp4AsmK8<>+0x100(SB)/4, $0x20000000
DATA fp4AsmK8<>+0x104(SB)/4, $0x30000000
DATA fp4AsmK8<>+0x108(SB)/4, $0x40000000
DATA fp4AsmK8<>+0x10c(SB)/4, $0x50000000
DATA fp4AsmK8<>+0x110(SB)/4, $0x60000000
DATA fp4AsmK8<>+0x114(SB)/4, $0x70000000
DATA fp4AsmK8<>+0x118(SB)/4, $0x00000000
DATA fp4AsmK8<>+0x11c(SB)/4, $0x10000000
GLOBL fp4AsmK8<>(SB), RODATA|NOPTR, $0x120

// ELEM8: one row of eight groups at off(SI) into the word W: Y0 the scales, Y8 the clip
// counts; leaves |x| in Y2 and |x| - value·s in Y5 (scratch Y1-Y5). The steps of ELEM, with
// vector masks and the ratio by division.
#define ELEM8(off, W) \
	VMOVUPS off(SI), Y1; \
	VANDPS  fp4AsmK8<>+0x00(SB), Y1, Y2; \
	VANDPS  fp4AsmK8<>+0x20(SB), Y1, Y1; \
	VDIVPS  Y0, Y2, Y3; \
	VCMPPS  $0x1e, fp4AsmK8<>+0x40(SB), Y3, Y4; \
	VPSUBD  Y4, Y8, Y8; \
	VMINPS  fp4AsmK8<>+0x60(SB), Y3, Y3; \
	VPAND   fp4AsmK8<>+0x80(SB), Y3, Y4; \
	VPADDD  fp4AsmK8<>+0xa0(SB), Y4, Y5; \
	VADDPS  Y5, Y3, Y3; \
	VSUBPS  Y5, Y3, Y3; \
	VPMAXUD fp4AsmK8<>+0xc0(SB), Y4, Y4; \
	VPADDD  fp4AsmK8<>+0xe0(SB), Y4, Y5; \
	VADDPS  Y5, Y3, Y3; \
	VSUBPS  Y5, Y3, Y5; \
	VPSRLD  $22, Y4, Y4; \
	VPADDD  Y3, Y4, Y4; \
	VPERMD  fp4AsmK8<>+0x100(SB), Y4, Y4; \
	VPOR    Y1, Y4, Y4; \
	VPSRLD  $4, W, W; \
	VPOR    Y4, W, W; \
	VMULPS  Y0, Y5, Y5; \
	VSUBPS  Y5, Y2, Y5

// fp4AsmErr: the sixteen E2M1 values, then the shift of nibble j into lane j of a word
// broadcast to eight 64-bit lanes.
DATA fp4AsmErr<>+0x00(SB)/4, $0.0
DATA fp4AsmErr<>+0x04(SB)/4, $0.5
DATA fp4AsmErr<>+0x08(SB)/4, $1.0
DATA fp4AsmErr<>+0x0c(SB)/4, $1.5
DATA fp4AsmErr<>+0x10(SB)/4, $2.0
DATA fp4AsmErr<>+0x14(SB)/4, $3.0
DATA fp4AsmErr<>+0x18(SB)/4, $4.0
DATA fp4AsmErr<>+0x1c(SB)/4, $6.0
DATA fp4AsmErr<>+0x20(SB)/4, $0x80000000
DATA fp4AsmErr<>+0x24(SB)/4, $-0.5
DATA fp4AsmErr<>+0x28(SB)/4, $-1.0
DATA fp4AsmErr<>+0x2c(SB)/4, $-1.5
DATA fp4AsmErr<>+0x30(SB)/4, $-2.0
DATA fp4AsmErr<>+0x34(SB)/4, $-3.0
DATA fp4AsmErr<>+0x38(SB)/4, $-4.0
DATA fp4AsmErr<>+0x3c(SB)/4, $-6.0
DATA fp4AsmErr<>+0x40(SB)/8, $0
DATA fp4AsmErr<>+0x48(SB)/8, $4
DATA fp4AsmErr<>+0x50(SB)/8, $8
DATA fp4AsmErr<>+0x58(SB)/8, $12
DATA fp4AsmErr<>+0x60(SB)/8, $16
DATA fp4AsmErr<>+0x68(SB)/8, $20
DATA fp4AsmErr<>+0x70(SB)/8, $24
DATA fp4AsmErr<>+0x78(SB)/8, $28
DATA fp4AsmErr<>+0x80(SB)/8, $0x7fffffffffffffff
DATA fp4AsmErr<>+0x88(SB)/8, $-1.0
GLOBL fp4AsmErr<>(SB), RODATA|NOPTR, $0x90

// fp4AsmDec: the nibble shifts of eight lanes, the eight E2M1 magnitudes, the sign bit of a
// code.
DATA fp4AsmDec<>+0x00(SB)/4, $0
DATA fp4AsmDec<>+0x04(SB)/4, $4
DATA fp4AsmDec<>+0x08(SB)/4, $8
DATA fp4AsmDec<>+0x0c(SB)/4, $12
DATA fp4AsmDec<>+0x10(SB)/4, $16
DATA fp4AsmDec<>+0x14(SB)/4, $20
DATA fp4AsmDec<>+0x18(SB)/4, $24
DATA fp4AsmDec<>+0x1c(SB)/4, $28
DATA fp4AsmDec<>+0x20(SB)/4, $0.0
DATA fp4AsmDec<>+0x24(SB)/4, $0.5
DATA fp4AsmDec<>+0x28(SB)/4, $1.0
DATA fp4AsmDec<>+0x2c(SB)/4, $1.5
DATA fp4AsmDec<>+0x30(SB)/4, $2.0
DATA fp4AsmDec<>+0x34(SB)/4, $3.0
DATA fp4AsmDec<>+0x38(SB)/4, $4.0
DATA fp4AsmDec<>+0x3c(SB)/4, $6.0
DATA fp4AsmDec<>+0x40(SB)/4, $8
DATA fp4AsmDec<>+0x44(SB)/4, $8
DATA fp4AsmDec<>+0x48(SB)/4, $8
DATA fp4AsmDec<>+0x4c(SB)/4, $8
DATA fp4AsmDec<>+0x50(SB)/4, $8
DATA fp4AsmDec<>+0x54(SB)/4, $8
DATA fp4AsmDec<>+0x58(SB)/4, $8
DATA fp4AsmDec<>+0x5c(SB)/4, $8
GLOBL fp4AsmDec<>(SB), RODATA|NOPTR, $0x60
