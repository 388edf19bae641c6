//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// decodeF16SIMD decodes the leading multiple of sixteen (AVX-512) or eight (AVX2) values and
// returns how many it did; the caller finishes with the scalar loop. With a = h&0x7fff and its
// exponent field e = a>>10, the float32 bits are those of floatcodec's three cases:
//
//	e in 1..30: a<<13 + 112<<23 (the exponent rebiased from 15 to 127, the mantissa moved up)
//	e = 31:     a<<13 + 224<<23 (infinity or NaN: exponent field 255, the payload kept)
//	e = 0:      float32(a)·2^-24 (zero or a subnormal: an integer below 2^10, converted exactly)
//
// with h's sign bit moved up sixteen places.
func decodeF16SIMD(dst []float32, src []byte) int {
	in := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/2)
	out := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst))
	n := 0
	switch lp {
	case &avx512Loops:
		mag, sign := archsimd.BroadcastUint32x16(0x7fff), archsimd.BroadcastUint32x16(0x8000)
		rebias, expMask := archsimd.BroadcastUint32x16(112<<23), archsimd.BroadcastUint32x16(0x7c00)
		zero, ulp := archsimd.BroadcastUint32x16(0), archsimd.BroadcastFloat32x16(0x1p-24)
		for ; n+16 <= len(out); n += 16 {
			h := archsimd.LoadUint16x16Slice(in[n:]).ExtendToUint32()
			a, e := h.And(mag), h.And(expMask)
			r := a.ShiftAllLeft(13).Add(rebias)
			r = r.Add(rebias).Merge(r, e.Equal(expMask))
			r = a.ConvertToFloat32().Mul(ulp).AsUint32x16().Merge(r, e.Equal(zero))
			r.Or(h.And(sign).ShiftAllLeft(16)).StoreSlice(out[n:])
		}
	case &avx2Loops:
		mag, sign := archsimd.BroadcastUint32x8(0x7fff), archsimd.BroadcastUint32x8(0x8000)
		rebias, expMask := archsimd.BroadcastUint32x8(112<<23), archsimd.BroadcastUint32x8(0x7c00)
		zero, ulp := archsimd.BroadcastUint32x8(0), archsimd.BroadcastFloat32x8(0x1p-24)
		for ; n+8 <= len(out); n += 8 {
			h := archsimd.LoadUint16x8Slice(in[n:]).ExtendToUint32()
			a, e := h.And(mag), h.And(expMask)
			r := a.ShiftAllLeft(13).Add(rebias)
			r = r.Add(rebias).Merge(r, e.Equal(expMask))
			r = a.AsInt32x8().ConvertToFloat32().Mul(ulp).AsUint32x8().Merge(r, e.Equal(zero))
			r.Or(h.And(sign).ShiftAllLeft(16)).StoreSlice(out[n:])
		}
	}
	archsimd.ClearAVXUpperBits()
	return n
}
