// The error sums step of the AVX-512 assembly loops (fp8block_amd64.s, int4rtn_amd64.s).

// The offsets of sums512's fields (errsums_asm_amd64.go checks them at compile time).
#define SR 0
#define SE 64
#define SA 128
#define DT 192
#define SG 256
#define BM 384
#define AB 456

// SUMSTEP adds eight elements to the sums: Z7 holds ref and Z8 got, widened to float64; Z6 is
// the |x| mask and R8 points at the chunk's |got-ref| slot for them. It is step512 of
// errsums_avx512.go instruction for instruction: e = got-ref; |e| stored; Σref² += ref·ref
// fused (exact product, one rounding); Σe² += e·e (rounded, then added); Σ|e| += |e|;
// Σref·got and Σgot² fused; the chunk maximum max(|e|, bm), which keeps bm when |e| is NaN.
#define SUMSTEP SUMSTEPAT(0)

// SUMSTEPAT is SUMSTEP with the |got-ref| slot off bytes after R8.
#define SUMSTEPAT(off) \
	VSUBPD      Z7, Z8, Z9; \
	VPANDQ      Z6, Z9, Z10; \
	VMOVUPD     Z10, off(R8); \
	VFMADD231PD Z7, Z7, Z0; \
	VMULPD      Z9, Z9, Z9; \
	VADDPD      Z9, Z1, Z1; \
	VADDPD      Z10, Z2, Z2; \
	VFMADD231PD Z8, Z7, Z3; \
	VFMADD231PD Z8, Z8, Z4; \
	VMAXPD      Z5, Z10, Z5

// SUMSLOAD loads the lanes of s (DI) into Z0-Z4, sets the chunk maximum Z5 to -1 and the
// mask Z6, and points R8 at s.ab.
#define SUMSLOAD \
	VMOVUPD      SR(DI), Z0; \
	VMOVUPD      SE(DI), Z1; \
	VMOVUPD      SA(DI), Z2; \
	VMOVUPD      DT(DI), Z3; \
	VMOVUPD      SG(DI), Z4; \
	MOVQ         $0xbff0000000000000, AX; \
	VPBROADCASTQ AX, Z5; \
	MOVQ         $0x7fffffffffffffff, AX; \
	VPBROADCASTQ AX, Z6; \
	LEAQ         AB(DI), R8

// SUMSSTORE stores Z0-Z5 back into s and clears the upper halves.
#define SUMSSTORE \
	VMOVUPD Z0, SR(DI); \
	VMOVUPD Z1, SE(DI); \
	VMOVUPD Z2, SA(DI); \
	VMOVUPD Z3, DT(DI); \
	VMOVUPD Z4, SG(DI); \
	VMOVUPD Z5, BM(DI); \
	VZEROUPPER
