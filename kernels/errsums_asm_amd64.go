//go:build goexperiment.simd && amd64

package kernels

import "unsafe"

// The AVX-512 error sums' chunk loops in assembly (fp8block_amd64.s, int4rtn_amd64.s, the step
// in errsums_amd64.h): the compiler's code for the same loops (pairsChunk, int4Chunk) kept
// some sums in memory and copied registers around every step; the assembly keeps the six
// sums, the mask and the table of a group in registers. Same operations in the same order on
// the same lanes: the same bits.

// pairsChunkAsm adds n elements (a positive multiple of eight, at most maxChunk) of ref
// against got to s, as pairsChunk does.
//
//go:noescape
func pairsChunkAsm(s *sums512, ref, got *float32, n int)

// int4ChunkAsm adds ref against the values of n packed words (0 < n ≤ maxChunk/8) to s, as
// int4Chunk does: scales points at the scale of the first word's group, of which left words
// (left > 0) remain from the first word on; the next groups have gw words each.
//
//go:noescape
func int4ChunkAsm(s *sums512, ref *float32, words *uint32, n int, scales *float32, left, gw int)

// The assembly addresses sums512's fields at these offsets (errsums_amd64.h); the arrays'
// lengths are zero unless they hold.
var (
	_ [unsafe.Offsetof(sums512{}.sr) - 0]struct{}
	_ [0 - unsafe.Offsetof(sums512{}.sr)]struct{}
	_ [unsafe.Offsetof(sums512{}.se) - 64]struct{}
	_ [64 - unsafe.Offsetof(sums512{}.se)]struct{}
	_ [unsafe.Offsetof(sums512{}.sa) - 128]struct{}
	_ [128 - unsafe.Offsetof(sums512{}.sa)]struct{}
	_ [unsafe.Offsetof(sums512{}.dt) - 192]struct{}
	_ [192 - unsafe.Offsetof(sums512{}.dt)]struct{}
	_ [unsafe.Offsetof(sums512{}.sg) - 256]struct{}
	_ [256 - unsafe.Offsetof(sums512{}.sg)]struct{}
	_ [unsafe.Offsetof(sums512{}.bm) - 384]struct{}
	_ [384 - unsafe.Offsetof(sums512{}.bm)]struct{}
	_ [unsafe.Offsetof(sums512{}.ab) - 456]struct{}
	_ [456 - unsafe.Offsetof(sums512{}.ab)]struct{}
)
