// Package kernels holds the compute loops of quantization behind one small interface, Backend.
//
// CPU, the default backend, is plain Go and is the specification: any other backend (CUDA, SIMD)
// must produce the same bytes for the same input. The loops are therefore written so that their
// floating-point results are fully determined:
//
//   - all arithmetic on weights is float32, IEEE round to nearest even; no fused multiply-add
//     (every product is rounded before it is added: in Go an explicit float32(...) conversion, in
//     CUDA __fmul_rn/__fadd_rn or -fmad=false);
//   - every sum over a group uses eight lanes: lane j accumulates elements j, j+8, j+16, ... in
//     index order, and the lanes combine as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7));
//   - rounding to an integer level is round-half-to-even (rintf); the Go loops use the exact
//     float32 trick (v + 1.5·2^23) - 1.5·2^23, valid because levels are clamped to [-8, 7] first;
//   - BF16 rounding is round-to-nearest-even of the float32 bit pattern (floatcodec.RoundBF16);
//   - divisions are IEEE divisions (CUDA __fdiv_rn), reciprocals are 1/s computed once per
//     candidate scale (__frcp_rn);
//   - the float64 error sums of a slice (ErrorSums) use eight lanes the same way, every term
//     exact in float64 before it is added.
//
// The scalar loops are the specification. Built with GOEXPERIMENT=simd (the Makefile sets it) on
// amd64, the CPU backend runs the same loops as AVX2 or AVX-512 vectors chosen at run time by CPU
// feature (SIMD names the set in use; PDQ_NOSIMD=1 keeps the scalar loops): each vector lane
// performs the scalar operations in the scalar order, and the horizontal sums pair lanes as the
// tree above does, so every output bit is the same, which simd_test.go and FuzzSIMD check set
// against set. On AVX-512 the INT4 quantizer also runs sixteen consecutive groups at once, one
// group per vector lane (search16_avx512.go), and on AVX2 eight in 256-bit vectors
// (search8_avx2.go): the eight per-group lanes above become eight accumulator vectors and every
// choice of search a lane mask with the scalar comparison, so each group gets the bytes the
// per-group loops give it (TestSIMDBatchSearch, TestSIMDBatchSearchErrorTies,
// FuzzSIMDBatchSearch). The activation-weighted search runs sixteen groups at once the same
// way, each lane with its group's column weights and candidate sequence (int4weighted_avx512.go;
// TestSIMDBatchWeighted, FuzzSIMDWeighted), and eight at once on AVX2 (int4weighted_avx2.go).
// A batch leaves the clamp of levels at -8 (or 7) out of a candidate's error only where no lane
// trying the candidate can need it; rounding gives the clamped level there anyway
// (clamps_simd.go, TestClampSkipBounds, clampedge_test.go). On AVX-512 the candidate loops and
// the error sums of both batched searches are Go assembly (search_amd64.s,
// search_weighted_amd64.s, search_amd64.h): the same operations in the same order, except that
// x − q·s is one fused multiply-add, which gives the same bits because q·s, a level times a BF16
// scale, is exact or overflows, and then the squared difference is +Inf either way
// (TestSIMDBatchSearchHuge).
// RTN needs no search, so its batches keep the groups in their natural layout: sixteen on
// AVX-512, two groups per vector (rtn16_avx512.go), eight on AVX2, one per vector
// (rtn8_avx2.go; TestSIMDRTNBatchTies, TestSIMDRTNBatchSubnormalScales, FuzzSIMDRTNBatch). The
// SIMD error sums add the products ref², ref·got and got² of two float32 values with a fused
// multiply-add: such a product is exact in float64, so the one rounding is the scalar loop's
// (errsums_avx512.go; TestSIMDErrorSumsMax, TestErrorSumsFusedAnyInput). The AVX2 set is used
// only where the CPU has FMA too (every AVX2 server CPU does).
//
// On AVX-512 the innermost loops of RTN (the batch's maxima and scales, its quantize-and-pack
// pass with the group statistics), of the FP8 block quantizer (maxima row by row, the encoder)
// and of the error sums (pairs, INT4 words, FP8 codes decoded in the loop) are Go assembly
// (int4rtn_amd64.s, fp8block_amd64.s, the sums step in errsums_amd64.h): the same operations
// in the same order on the same lanes as the Go vector loops they replace, checked by the same
// tests, with the constants and sums in registers where the compiler reloaded and spilled
// them. They end with VZEROUPPER and the listing test reads them too.
//
// The widest set the CPU has is used, a static choice: with the loops below, AVX-512 costs the
// least CPU and AVX2 less than scalar for every kernel on both the Intel Xeon and the AMD EPYC
// hosts measured (docs/QUALITY.md). On Intel cores a legacy-SSE instruction (the compiler's
// scalar float code, MOVQ of a shift count, MOVUPS zeroing) run while the upper halves of the
// vector registers are dirty pays a transition each time, so the vector loops contain none and
// end with VZEROUPPER before scalar code runs (vexshift_simd.go); TestNoLegacySSEInVectorCode
// reads the compiler's listing of the package and keeps it so on any CPU.
//
// Inputs must be finite; the loops detect NaN and ±Inf through the group (or block) absolute
// maximum and report the first offending element instead of producing output.
//
// INT4 group quantization (Int4Params) follows the compressed-tensors pack-quantized layout:
// signed level q in [-8, 7] is stored as nibble q+8, eight nibbles per little-endian 32-bit word,
// least significant first along the row; one BF16 scale per group of GroupSize elements.
// FP8 block quantization uses 128×128 blocks, e4m3fn codes and float32 multipliers.
package kernels
