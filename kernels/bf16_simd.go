//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// decodeBF16SIMD decodes the leading multiple of sixteen (AVX-512) or eight (AVX2) values and
// returns how many it did; the caller finishes with the scalar loop.
func decodeBF16SIMD(dst []float32, src []byte) int {
	in := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/2)
	out := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst))
	n := 0
	switch lp {
	case &avx512Loops:
		for ; n+16 <= len(out); n += 16 {
			archsimd.LoadUint16x16Slice(in[n:]).ExtendToUint32().ShiftAllLeft(16).StoreSlice(out[n:])
		}
	case &avx2Loops:
		for ; n+8 <= len(out); n += 8 {
			archsimd.LoadUint16x8Slice(in[n:]).ExtendToUint32().ShiftAllLeft(16).StoreSlice(out[n:])
		}
	}
	archsimd.ClearAVXUpperBits()
	return n
}

// encodeBF16SIMD encodes the leading multiple of sixteen (AVX-512) or eight (AVX2) values as
// floatcodec.Float32ToBF16: b + 0x7fff + (b>>16)&1, the high half kept; a NaN (|b| above
// 0x7f800000) keeps its high half with the quiet bit 0x0040 set. It returns how many it did.
func encodeBF16SIMD(dst []byte, src []float32) int {
	in := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src))), len(src))
	out := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/2)
	n := 0
	switch lp {
	case &avx512Loops:
		round, one, quiet := archsimd.BroadcastUint32x16(0x7fff), archsimd.BroadcastUint32x16(1), archsimd.BroadcastUint32x16(0x0040)
		abs, inf := archsimd.BroadcastInt32x16(0x7fffffff), archsimd.BroadcastInt32x16(0x7f800000)
		for ; n+16 <= len(in); n += 16 {
			b := archsimd.LoadUint32x16Slice(in[n:])
			// Arithmetic shifts (immediate forms; Go 1.26 gives the logical ones their count in
			// a legacy-SSE register): the truncation below keeps only the low sixteen bits.
			r := sra16(sra16(b, 16).And(one).Add(b.Add(round)), 16)
			nan := b.AsInt32x16().And(abs).Greater(inf)
			r = sra16(b, 16).Or(quiet).Merge(r, nan)
			r.TruncateToUint16().StoreSlice(out[n:])
		}
	case &avx2Loops:
		round, one, quiet := archsimd.BroadcastUint32x8(0x7fff), archsimd.BroadcastUint32x8(1), archsimd.BroadcastUint32x8(0x0040)
		abs, inf := archsimd.BroadcastInt32x8(0x7fffffff), archsimd.BroadcastInt32x8(0x7f800000)
		sixteen := archsimd.BroadcastUint32x8(16) // the count of the per-lane shift (VPSRLVD)
		for ; n+8 <= len(in); n += 8 {
			b := archsimd.LoadUint32x8Slice(in[n:])
			r := b.Add(round).Add(b.ShiftRight(sixteen).And(one)).ShiftRight(sixteen)
			nan := b.AsInt32x8().And(abs).Greater(inf)
			h := b.ShiftRight(sixteen).Or(quiet).Merge(r, nan).AsInt32x8()
			// Every h is below 2^16, so the unsigned saturating pack (VPACKUSDW, AVX) keeps it;
			// the truncating VPMOVDW the AVX-512 branch uses is not in AVX2.
			h.GetLo().SaturateToUint16Concat(h.GetHi()).StoreSlice(out[n:])
		}
	}
	archsimd.ClearAVXUpperBits()
	return n
}
