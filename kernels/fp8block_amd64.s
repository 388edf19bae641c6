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
