//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// The AVX2 error sums with FMA, errsums_avx512.go's method in 256-bit vectors: the products
// ref², ref·got and got² fused into their sums (exact products, one rounding, as the scalar
// loop), and each lane's largest |got-ref| found per chunk as a VMAXPD maximum, its index looked
// up only when the chunk beats the lane's maximum. Lanes 0-3 and 4-7 of the specification are
// independent sums, so a chunk runs twice, once for each half: five accumulators and the chunk
// maximum then fit in AVX2's sixteen registers. (The AVX2 loop set registers only where the CPU
// has FMA too.)

var absMask64 archsimd.Uint64x4 // |x| of float64 lanes (set when the AVX2 loops register)

// sums256 holds the lanes of errAcc between chunks, the current chunk's maxima and |got-ref|,
// and the index of its first element.
type sums256 struct {
	sr, se, sa, dt, sg [2]archsimd.Float64x4 // lanes 0-3, 4-7
	bm                 [8]float64
	ab                 [maxChunk]float64
	base               int64
}

func (a *errAcc) load256(s *sums256) {
	for h := range 2 {
		s.sr[h] = archsimd.LoadFloat64x4((*[4]float64)(a.sumSqRef[4*h:]))
		s.se[h] = archsimd.LoadFloat64x4((*[4]float64)(a.sumSqErr[4*h:]))
		s.sa[h] = archsimd.LoadFloat64x4((*[4]float64)(a.sumAbsErr[4*h:]))
		s.dt[h] = archsimd.LoadFloat64x4((*[4]float64)(a.dot[4*h:]))
		s.sg[h] = archsimd.LoadFloat64x4((*[4]float64)(a.sumSqGot[4*h:]))
	}
	s.base = a.n
}

func (a *errAcc) save256(s *sums256) {
	for h := range 2 {
		s.sr[h].Store((*[4]float64)(a.sumSqRef[4*h:]))
		s.se[h].Store((*[4]float64)(a.sumSqErr[4*h:]))
		s.sa[h].Store((*[4]float64)(a.sumAbsErr[4*h:]))
		s.dt[h].Store((*[4]float64)(a.dot[4*h:]))
		s.sg[h].Store((*[4]float64)(a.sumSqGot[4*h:]))
	}
	a.n = s.base
}

// endChunk256 ends a chunk of n elements: a lane whose chunk maximum exceeds its maximum so far
// takes it and the index of its first occurrence (the chunk maximum is the largest non-NaN
// |got-ref|, -1 when there is none; a NaN maximum so far is never exceeded).
func (a *errAcc) endChunk256(s *sums256, n int) {
	for l, m := range s.bm {
		if m > a.maxAbs[l] {
			for j := l; j < n; j += 8 {
				if s.ab[j] == m {
					a.maxIdx[l] = s.base + int64(j)
					break
				}
			}
			a.maxAbs[l] = m
		}
	}
	s.base += int64(n)
}

// chunk adds half h (lanes 4h..4h+3) of ref against got (a multiple of eight elements, at
// most maxChunk).
//
//go:noinline
func (s *sums256) chunk(ref, got []float32, h int) {
	sr, se, sa, dt, sg := s.sr[h], s.se[h], s.sa[h], s.dt[h], s.sg[h]
	bm := archsimd.BroadcastFloat64x4(-1)
	got = got[:len(ref)]
	ab := s.ab[:len(ref)]
	for j := 4 * h; j+4 <= len(ref); j += 8 {
		r := archsimd.LoadFloat32x4((*[4]float32)(ref[j:])).ConvertToFloat64()
		g := archsimd.LoadFloat32x4((*[4]float32)(got[j:])).ConvertToFloat64()
		e := g.Sub(r)
		abs := e.AsUint64x4().And(absMask64).AsFloat64x4()
		abs.Store((*[4]float64)(ab[j:]))
		sr, se, sa = r.MulAdd(r, sr), se.Add(e.Mul(e)), sa.Add(abs)
		dt, sg, bm = r.MulAdd(g, dt), g.MulAdd(g, sg), abs.Max(bm)
	}
	s.sr[h], s.se[h], s.sa[h], s.dt[h], s.sg[h] = sr, se, sa, dt, sg
	bm.Store((*[4]float64)(s.bm[4*h:]))
	archsimd.ClearAVXUpperBits() // endChunk256 is scalar
}

// add256 adds ref against got (a multiple of eight elements; a on a lane boundary with every
// lane filled) chunk by chunk.
func (a *errAcc) add256(s *sums256, ref, got []float32) {
	for c := 0; c < len(ref); c += maxChunk {
		m := min(len(ref)-c, maxChunk)
		s.chunk(ref[c:c+m], got[c:c+m], 0)
		s.chunk(ref[c:c+m], got[c:c+m], 1)
		a.endChunk256(s, m)
	}
}

// errLanesInt4FMA is errLanesInt4AVX2 with the FMA sums, one sums256 for the whole slab (a on a
// lane boundary with every lane filled).
func errLanesInt4FMA(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	var s sums256
	var buf [maxChunk]float32 // zeroed before the vector code
	shr := archsimd.LoadUint32x8Slice(nibbleShifts[:])
	fifteen := archsimd.BroadcastUint32x8(15)
	minus8 := bc(-8)
	a.load256(&s)
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4)
	n := 0 // elements in buf
	for k := range scales {
		vs := bcAt(&scales[k])
		for _, w := range words[k*g/8 : (k+1)*g/8] {
			nib := archsimd.BroadcastUint32x8(w).ShiftRight(shr).And(fifteen)
			nib.AsInt32x8().ConvertToFloat32().Add(minus8).Mul(vs).Store((*[8]float32)(buf[n:]))
			if n += 8; n == len(buf) {
				a.add256(&s, ref[:n], buf[:n])
				ref, n = ref[n:], 0
			}
		}
	}
	a.add256(&s, ref[:n], buf[:n])
	a.save256(&s)
	archsimd.ClearAVXUpperBits()
}
