//go:build goexperiment.simd && amd64

package kernels

// gemmTileAVX512Asm is the hand-written AVX-512 form of gemmTileScalar (gemm_amd64.s): the
// Go compiler's code for gemmTileAVX512 copies registers around its fused multiply-adds and
// broadcasts A's values with separate instructions; the assembly takes them from memory
// ({1to16}) into VFMADD231PS. Same operations in the same order: the same bits. The caller
// guarantees the bounds (gemmTileAVX512A checks them).
//
//go:noescape
func gemmTileAVX512Asm(kc int, ap, bp, c []float32, ldc int)

// gemmTileAVX512A is the loop sets' entry to gemmTileAVX512Asm: it checks that the packed
// panels hold kc steps and that C holds the tile, as the Go forms' slicing does.
func gemmTileAVX512A(kc int, ap, bp, c []float32, ldc int) {
	ap, bp = ap[:kc*gemmMR], bp[:kc*gemmNR]
	_ = c[(gemmMR-1)*ldc+gemmNR-1]
	gemmTileAVX512Asm(kc, ap, bp, c, ldc)
}
