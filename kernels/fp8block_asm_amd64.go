//go:build goexperiment.simd && amd64

package kernels

// The FP8 block quantizer's two passes in assembly (fp8block_amd64.s): the maxima read row by
// row over all the blocks of a block row, and the encoder over a row of blocks with its
// constants in registers (the compiler's code for encodeE4M3RowAVX512 kept the loop's indices
// on the stack and rebuilt the block bounds every step). Same operations as the Go loops: the
// same codes and scales (TestSIMDEncodeE4M3RowSweep, TestSIMDQuantizeFP8BlockShapes, the golden
// hashes).

// blockRowAbsMaxAsm sets acc[b] (sixteen lanes each, nb of them from acc on) to the lane-wise
// maximum of itself and the |x| bit patterns of the 128 elements of block b in each of rows
// rows of src, stride bytes apart (nb > 0, rows > 0).
//
//go:noescape
func blockRowAbsMaxAsm(acc *[16]uint32, src *float32, stride, rows, nb int)

// encodeE4M3RowAsm encodes the first n elements of row (n a positive multiple of 16) into
// codes, element j with the scale sc[j/FP8Block], as encodeE4M3AVX512 does.
//
//go:noescape
func encodeE4M3RowAsm(codes *byte, row *float32, sc *float32, n int)

// fp8ChunkAsm adds ref against the FP8 block dequantization of n codes of one row (n a
// positive multiple of 16, at most maxChunk) to s: scales points at the scale of the first
// element's block, of which left elements remain; the next blocks have bw elements each
// (left and bw positive multiples of 16).
//
//go:noescape
func fp8ChunkAsm(s *sums512, ref *float32, codes *byte, n int, scales *float32, left, bw int)
