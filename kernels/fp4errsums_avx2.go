//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// errLanesFP4AVX2 is the error sums of ref against DequantizeFP4's values as errLanesInt4AVX2
// takes INT4's: the values are decoded into a stack buffer maxChunk at a time (eight codes of a
// word shifted into lanes, their magnitudes permuted from the eight grid values, the sign bit
// moved in from bit 3, times the group's scale: the float32 products of expandFP4) and the sums
// run over it with one sums256 for the whole slab; by default the decoding of a chunk and its
// sums are assembly (fp4DecodeAVX2, fp4ErrChunkAVX2). a must be on a lane boundary (a.n%8 == 0)
// and scales not empty; the first group goes through the scalar step when a has fewer than
// eight elements, so that every lane holds one.
func errLanesFP4AVX2(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	var buf [maxChunk]float32 // zeroed before the vector code
	if a.n < 8 {
		var b [MXFP4GroupSize]float32
		expandFP4(b[:g], packed[:g/2], scales[0])
		for i, v := range b[:g] {
			a.add(ref[i], v)
		}
		ref, packed, scales = ref[g:], packed[g/2:], scales[1:]
	}
	var s sums256
	if !fp4NoAsm {
		// A chunk of whole groups at a time (g divides maxChunk), decoded by fp4DecodeAVX2.
		a.load256(&s)
		words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4)
		per := maxChunk / g
		for k0 := 0; k0 < len(scales); k0 += per {
			k1 := min(len(scales), k0+per)
			n := (k1 - k0) * g
			_ = words[k1*g/8-1]
			fp4DecodeAVX2(&buf[0], &words[k0*g/8], &scales[k0], k1-k0, g/8)
			a.addFP4Chunk(&s, ref[:n], buf[:n])
			ref = ref[n:]
		}
		a.save256(&s)
		archsimd.ClearAVXUpperBits()
		return
	}
	shr := archsimd.LoadUint32x8Slice(nibbleShifts[:])
	table := archsimd.LoadFloat32x8((*[8]float32)(e2m1Values[:8]))
	eight := archsimd.BroadcastUint32x8(8)
	a.load256(&s)
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4)
	n := 0 // elements in buf
	for k := range scales {
		vs := bcAt(&scales[k])
		for _, w := range words[k*g/8 : (k+1)*g/8] {
			c := archsimd.BroadcastUint32x8(w).ShiftRight(shr)
			sign := c.And(eight).ShiftAllLeft(28)
			v := table.Permute(c).AsUint32x8().Or(sign).AsFloat32x8()
			v.Mul(vs).Store((*[8]float32)(buf[n:]))
			if n += 8; n == len(buf) {
				a.addFP4Chunk(&s, ref[:n], buf[:n])
				ref, n = ref[n:], 0
			}
		}
	}
	a.addFP4Chunk(&s, ref[:n], buf[:n])
	a.save256(&s)
	archsimd.ClearAVXUpperBits()
}

// addFP4Chunk is add256 for at most maxChunk elements, the sums by fp4ErrChunkAVX2.
func (a *errAcc) addFP4Chunk(s *sums256, ref, got []float32) {
	if fp4NoAsm || len(ref) == 0 {
		a.add256(s, ref, got)
		return
	}
	got = got[:len(ref)]
	_ = s.ab[len(ref)-1]
	fp4ErrChunkAVX2(s, &s.ab[0], &ref[0], &got[0], len(ref))
	a.endChunk256(s, len(ref))
}
