//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// errLanesFP4AVX512 is the error sums of ref against DequantizeFP4's values in one pass, as
// errLanesInt4AVX512 does for INT4: per group, the sixteen values e2m1Values[c]·s (float32
// products, widened to float64) fill two Float64x8 registers, and each word's eight values are
// one two-register permute of them by its codes. a must be on a lane boundary (a.n%8 == 0)
// and scales not empty; the first group goes through the scalar step when a has fewer than
// eight elements.
func errLanesFP4AVX512(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	wi := 0 // the next word
	if a.n < 8 {
		// The first group through the scalar step, so that every lane holds an element and the
		// chunks start on group boundaries.
		var b [MXFP4GroupSize]float32
		expandFP4(b[:g], packed[:g/2], scales[0])
		for i, v := range b[:g] {
			a.add(ref[i], v)
		}
		wi = g / 8
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4)
	var s sums512
	a.load512(&s)
	for wi < len(words) {
		if len(words)-wi >= maxChunk/8 {
			s.fp4ChunkFull((*[maxChunk]float32)(ref[8*wi:]), (*[maxChunk / 8]uint32)(words[wi:]), scales, wi, g/8)
			a.endChunk(&s, maxChunk)
			wi += maxChunk / 8
			continue
		}
		n := len(words) - wi
		s.fp4Chunk(ref[8*wi:8*(wi+n)], words[wi:wi+n], scales, wi, g/8)
		a.endChunk(&s, 8*n)
		wi += n
	}
	a.save512(&s)
	archsimd.ClearAVXUpperBits()
}

// fp4ChunkFull is fp4Chunk for a whole chunk starting on a group boundary (w0 a multiple of
// gw, which divides maxChunk/8), with array pointers the compiler needs no bounds checks for:
// each group's table, then its words. By default the loop is assembly (fp4ErrChunkAVX512).
//
//go:noinline
func (s *sums512) fp4ChunkFull(ref *[maxChunk]float32, words *[maxChunk / 8]uint32, scales []float32, w0, gw int) {
	if !fp4NoAsm {
		sc := scales[w0/gw : w0/gw+maxChunk/8/gw]
		fp4ErrChunkAVX512(s, &s.ab[0], &ref[0], &words[0], &sc[0], len(sc), gw)
		return
	}
	sr, se, sa, dt, sg, bm := s.sr, s.se, s.sa, s.dt, s.sg, negOne64x8
	shifts := nibbleShifts64
	table := archsimd.LoadFloat32x16(&e2m1Values)
	sc := scales[w0/gw : w0/gw+maxChunk/8/gw]
	j := 0
	for _, v := range sc {
		lut := table.Mul(bc16(v))
		t0, t1 := lut.GetLo().ConvertToFloat64(), lut.GetHi().ConvertToFloat64()
		for end := j + gw; j < end && j < maxChunk/8; j++ {
			g := t0.ConcatPermute(t1, archsimd.BroadcastUint64x8(uint64(words[j])).ShiftRight(shifts))
			r := archsimd.LoadFloat32x8((*[8]float32)(ref[8*j:])).ConvertToFloat64()
			sr, se, sa, dt, sg, bm = step512(r, g, sr, se, sa, dt, sg, bm, (*[8]float64)(s.ab[8*j:]))
		}
	}
	s.sr, s.se, s.sa, s.dt, s.sg, s.bm = sr, se, sa, dt, sg, bm
}

// fp4Chunk adds ref against the values of words (at most maxChunk/8 of them, the first being
// word w0 of the slab, groups of gw words with the scales given).
//
//go:noinline
func (s *sums512) fp4Chunk(ref []float32, words []uint32, scales []float32, w0, gw int) {
	sr, se, sa, dt, sg, bm := s.sr, s.se, s.sa, s.dt, s.sg, negOne64x8
	shifts := nibbleShifts64
	table := archsimd.LoadFloat32x16(&e2m1Values)
	ref = ref[:8*len(words)]
	ab := s.ab[:len(ref)]
	k := w0 / gw
	left := (k+1)*gw - w0 // words left in group k
	lut := table.Mul(bc16(scales[k]))
	t0, t1 := lut.GetLo().ConvertToFloat64(), lut.GetHi().ConvertToFloat64()
	for _, w := range words {
		if left == 0 {
			k, left = k+1, gw
			lut := table.Mul(bc16(scales[k]))
			t0, t1 = lut.GetLo().ConvertToFloat64(), lut.GetHi().ConvertToFloat64()
		}
		left--
		g := t0.ConcatPermute(t1, archsimd.BroadcastUint64x8(uint64(w)).ShiftRight(shifts))
		r := archsimd.LoadFloat32x8((*[8]float32)(ref)).ConvertToFloat64()
		sr, se, sa, dt, sg, bm = step512(r, g, sr, se, sa, dt, sg, bm, (*[8]float64)(ab))
		ref, ab = ref[8:], ab[8:]
	}
	s.sr, s.se, s.sa, s.dt, s.sg, s.bm = sr, se, sa, dt, sg, bm
}
