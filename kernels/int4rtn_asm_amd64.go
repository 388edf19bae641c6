//go:build goexperiment.simd && amd64

package kernels

// The RTN batch's second pass in assembly (int4rtn_amd64.s): the compiler's code for rtnQuad
// reloaded its constants from memory in every step, moved the clip masks through general
// registers and a table look-up per step, and spilled around the calls of rtnPair; the
// assembly keeps the constants and the sums of a pair in registers, counts the clips in a
// vector with a masked add, and takes the elements 0-7 and 8-15 of two groups with 128-bit
// shuffles (no index vectors). Same operations in the same order on the same lanes as
// rtnPair: the same bytes and sums (TestSIMDRTNBatchTies, FuzzSIMDRTNBatch, the golden
// hashes).

// maxRTNAsmGroup bounds the groups rtnPairsAsm takes: it counts the clips of a lane (one per
// step, g/8 in all) in a byte.
const maxRTNAsmGroup = 2040

// rtnScalesAsm is rtnBatch16's first pass over sixteen groups of size elements from x (size a
// positive multiple of 16): each group's RTN scale bf16(absmax/7.5) into scales and its BF16
// code into scale; ok has bit l set when group l's maximum is finite and its scale not zero,
// and full reports a subnormal scale among those.
//
//go:noescape
func rtnScalesAsm(x *float32, size int, scale *[batchGroups]uint16, scales *[batchGroups]float32) (ok uint16, full bool)

// rtnPairsOut is what rtnPairsAsm leaves per pair i of groups (2i, 2i+1): the eight-lane error
// and Σx² sums (lanes 0-7 group 2i, 8-15 group 2i+1) and the two groups' clip counts. The
// assembly writes e at offset 0, ss at 512 and clip at 1024.
type rtnPairsOut struct {
	e, ss [batchGroups / 2][16]float32
	clip  [batchGroups / 2][2]uint64
}

// rtnPairsAsm quantizes sixteen groups of size elements from x (size a positive multiple of 32,
// at most maxRTNAsmGroup) with the scales (normal float32 values or zero: rtnPair's full
// false) into dst (8·size bytes) and out, as rtnPair does pair by pair, then writes the
// groups' statistics to stats (sixteen of them: SumSq, Err and RTNErr the sums reduced as
// rtnBatch16 reduces rtnPair's, Clipped) and copies the BF16 codes to scaleOut (32 bytes).
//
//go:noescape
func rtnPairsAsm(x *float32, dst *byte, size int, scales *[batchGroups]float32, out *rtnPairsOut, stats *GroupStats, codes *[batchGroups]uint16, scaleOut *byte)
