//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// The AVX-512 error sums. One Float64x8 register holds the eight lanes of each sum of errsums.go,
// and two things make a step of eight elements cheaper than the scalar order suggests, without
// changing a bit of the result:
//
//   - Σref², Σref·got and Σgot² add products of two float32 values, which are exact in float64
//     (24-bit significands, exponents far inside float64's range), so a fused multiply-add
//     rounds once where the specification rounds once too: fma(r, g, acc) = acc + r·g exactly
//     as the scalar loop computes it. Σ(got-ref)² is not fused: the difference may carry more
//     bits than a product of it can keep.
//   - The largest |got-ref| of each lane is found as the maximum of a chunk of maxChunk
//     elements (one VMAXPD a step, which keeps its second operand when the first is NaN, as the
//     scalar "ab > max" skips NaN), and only when a chunk's maximum exceeds the lane's maximum
//     so far is the first index reaching it looked up in the chunk's saved |got-ref|. That is
//     the element the scalar loop keeps: the first strict record of the lane. The first eight
//     elements of a slice go through the scalar step, so that every lane has an element (and a
//     NaN first element stays the lane's maximum, as in the scalar loop).

// maxChunk is the number of elements whose |got-ref| is kept for the index look-up.
const maxChunk = 256

// sums512 holds the lanes of errAcc while a loop runs, the maximum bm of the current chunk
// and the chunk's |got-ref| in element order; base is the index of the chunk's first element.
// The chunk loops (not inlined) copy the sums into locals and back: Go keeps a struct of more
// than four fields in memory, and keeps in memory any vector that lives across a call, which
// would lengthen every accumulator's dependency chain.
type sums512 struct {
	sr, se, sa, dt, sg, mx, bm archsimd.Float64x8
	base                       int64
	ab                         [maxChunk]float64
}

// load512 copies a's lanes out; every lane of a must hold an element (a.n >= 8).
func (a *errAcc) load512(s *sums512) {
	s.sr = archsimd.LoadFloat64x8(&a.sumSqRef)
	s.se = archsimd.LoadFloat64x8(&a.sumSqErr)
	s.sa = archsimd.LoadFloat64x8(&a.sumAbsErr)
	s.dt = archsimd.LoadFloat64x8(&a.dot)
	s.sg = archsimd.LoadFloat64x8(&a.sumSqGot)
	s.mx = archsimd.LoadFloat64x8(&a.maxAbs)
	s.base = a.n
}

// save512 stores the lanes back into a.
func (a *errAcc) save512(s *sums512) {
	s.sr.Store(&a.sumSqRef)
	s.se.Store(&a.sumSqErr)
	s.sa.Store(&a.sumAbsErr)
	s.dt.Store(&a.dot)
	s.sg.Store(&a.sumSqGot)
	s.mx.Store(&a.maxAbs)
	a.n = s.base
}

// endChunk ends a chunk of n elements: lanes whose chunk maximum exceeds their maximum so far
// take it, and the index of its first occurrence in the chunk. The look-up is scalar, after
// the upper halves are cleared.
//
//go:noinline
func (a *errAcc) endChunk(s *sums512, n int) {
	upd := s.bm.Greater(s.mx)
	bits := upd.ToBits()
	s.mx = s.bm.Merge(s.mx, upd)
	archsimd.ClearAVXUpperBits()
	if bits != 0 {
		m := (*[8]float64)(unsafe.Pointer(&s.bm))
		for l := range 8 {
			if bits>>l&1 == 0 {
				continue
			}
			for j := l; j < n; j += 8 {
				if s.ab[j] == m[l] { // the chunk maximum is the largest non-NaN |got-ref|
					a.maxIdx[l] = s.base + int64(j)
					break
				}
			}
		}
	}
	s.base += int64(n)
}

var negOne64x8 archsimd.Float64x8 // -1 in every lane (initAVX512Vectors)

// step512 adds eight elements (ref r and got g, widened to float64) to the sums and saves
// their |g-r| at ab. (Values in and out: a vector whose address is taken stays in memory.)
func step512(r, g, sr, se, sa, dt, sg, bm archsimd.Float64x8, ab *[8]float64) (_, _, _, _, _, _ archsimd.Float64x8) {
	e := g.Sub(r)
	abs := e.AsUint64x8().And(absMask64x8).AsFloat64x8()
	abs.Store(ab)
	return r.MulAdd(r, sr), se.Add(e.Mul(e)), sa.Add(abs), r.MulAdd(g, dt), g.MulAdd(g, sg), abs.Max(bm)
}

// scalarHead adds elements through the scalar step until a is on a lane boundary with every
// lane filled, and returns how many it took.
func (a *errAcc) scalarHead(ref, got []float32) int {
	i := 0
	for ; i < len(ref) && (a.n&7 != 0 || a.n < 8); i++ {
		a.add(ref[i], got[i])
	}
	return i
}

// errLanesAVX512 is errLanesScalar with the sums in vectors, a chunk of maxChunk elements at
// a time.
func errLanesAVX512(a *errAcc, ref, got []float32) {
	got = got[:len(ref)]
	h := a.scalarHead(ref, got)
	ref, got = ref[h:], got[h:]
	n := len(ref) &^ 7
	if n > 0 {
		var s sums512
		a.load512(&s)
		for c := 0; c < n; c += maxChunk {
			m := min(n-c, maxChunk)
			s.pairsChunk(ref[c:c+m], got[c:c+m])
			a.endChunk(&s, m)
		}
		a.save512(&s)
		archsimd.ClearAVXUpperBits()
	}
	for i := n; i < len(ref); i++ {
		a.add(ref[i], got[i])
	}
}

// pairsChunk adds ref against got (a multiple of eight elements, at most maxChunk) with the
// assembly loop (fp8block_amd64.s).
func (s *sums512) pairsChunk(ref, got []float32) {
	n := len(ref) &^ 7
	if n == 0 {
		return
	}
	_, _ = got[n-1], s.ab[n-1] // n ≤ maxChunk
	pairsChunkAsm(s, &ref[0], &got[0], n)
}

// nibbleShifts64 places nibble j of a word in the low bits of lane j.
var nibbleShifts64 archsimd.Uint64x8 // initAVX512Vectors

var nibbleShifts64Arr = [8]uint64{0, 4, 8, 12, 16, 20, 24, 28}

// errLanesInt4AVX512 is errLanesInt4Scalar in one pass: per group, the sixteen values
// (nibble-8)·s of the scalar table (float32 products, widened to float64) fill two Float64x8
// registers, and each word's eight values are one two-register permute of them by its
// nibbles, the lane index shifted out of the word.
func errLanesInt4AVX512(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	if a.n&7 != 0 || len(scales) == 0 {
		errLanesInt4Scalar(a, ref, packed, scales, g)
		return
	}
	wi := 0 // the next word
	if a.n < 8 {
		lut := int4LUT(scales[0])
		var b [8]float32
		expandInt4(b[:], packed[:4], &lut)
		for i, v := range b {
			a.add(ref[i], v)
		}
		wi = 1
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4)
	gw := g / 8
	var s sums512
	a.load512(&s)
	for wi < len(words) {
		n := min(len(words)-wi, maxChunk/8)
		k := wi / gw
		_, _ = ref[8*(wi+n)-1], scales[(wi+n-1)/gw]
		int4ChunkAsm(&s, &ref[8*wi], &words[wi], n, &scales[k], (k+1)*gw-wi, gw)
		a.endChunk(&s, 8*n)
		wi += n
	}
	a.save512(&s)
	archsimd.ClearAVXUpperBits()
}
