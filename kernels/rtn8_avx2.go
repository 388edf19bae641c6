//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"math/bits"
	"simd/archsimd"
	"unsafe"
)

// RTN quantization of eight groups at once in 256-bit vectors, for CPUs with AVX2 and without
// AVX-512 (or with the loops forced to "avx2"): rtn16_avx512.go's batch with half the lanes. The
// groups keep their natural layout: a vector of eight consecutive elements of one group is one
// packed word and, lane for lane, the specification's eight sum lanes, exactly as packAVX2 runs
// one group. What the batch saves are the per-group steps: the eight absolute maxima are
// reduced to one vector together (interleaves and maxima), the eight scales are computed in one
// vector, and the eight error and Σx² vectors are reduced to one lane per group together by
// horizontal adds, which pair the lanes as the tree ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) does.
// Each element is quantized with packDiv's operations in packDiv's order (IEEE division, clamp,
// the rounding trick with 1.5·2^23+8, see rtn16_avx512.go). No FMA, no package-level vectors.

// quantRTNBatchesAVX2 quantizes the groups of src (any group size) with the RTN rule in whole
// batches of eight and returns how many it did; the caller does the rest one group at a time.
// Groups quantGroup treats apart (non-finite, zero scale) are redone by quantGroup, so that the
// first non-finite value is reported as the per-group loop reports it.
func quantRTNBatchesAVX2(out Int4Out, src []float32, ng int, p *Int4Params) (int, error) {
	g := p.GroupSize
	var res rtnBatch
	k0 := 0
	for ; k0+avx2Groups <= ng; k0 += avx2Groups {
		ok := rtnBatch8(&res, src[k0*g:(k0+avx2Groups)*g], out.Packed[k0*g/2:(k0+avx2Groups)*g/2], g)
		if k, err := storeRTNBatch(out, src, k0, avx2Groups, ok, p, &res); err != nil {
			return k, err
		}
	}
	return k0, nil
}

// rtnBatch8 quantizes the eight groups of x (g elements each) into dst and the first eight
// lanes of res, and returns the mask of the groups it did: those whose maximum is finite and
// whose scale is not zero.
func rtnBatch8(res *rtnBatch, x []float32, dst []byte, g int) uint16 {
	// Zeroed here, before the vector code (zeroing is legacy SSE).
	var sc [avx2Groups]float32
	var es, ss [avx2Groups]archsimd.Float32x8
	abs := archsimd.BroadcastUint32x8(0x7fffffff)
	ld := func(i int) archsimd.Float32x8 { return archsimd.LoadFloat32x8((*[8]float32)(x[i:])) }
	gm := func(l int) archsimd.Uint32x8 {
		if g == 32 {
			v := (*[32]float32)(x[l*32:])
			a := func(i int) archsimd.Uint32x8 {
				return archsimd.LoadFloat32x8((*[8]float32)(v[i:])).AsUint32x8().And(abs)
			}
			return a(0).Max(a(8)).Max(a(16).Max(a(24)))
		}
		var m archsimd.Uint32x8
		for v := l * g; v < (l+1)*g; v += 8 {
			m = m.Max(ld(v).AsUint32x8().And(abs))
		}
		return m
	}
	// mx2 of groups a, b: lanes (a02 b02 a13 b13 | a46 b46 a57 b57), aij = max(a_i, a_j).
	mx2 := func(a, b archsimd.Uint32x8) archsimd.Uint32x8 {
		return a.InterleaveLoGrouped(b).Max(a.InterleaveHiGrouped(b))
	}
	// mx4 of two mx2 results: the maxima of groups a, b, c, d over lanes 0-3 | over lanes 4-7.
	mx4 := func(ab, cd archsimd.Uint32x8) archsimd.Uint32x8 {
		p, q := ab.AsUint64x4(), cd.AsUint64x4()
		return p.InterleaveLoGrouped(q).AsUint32x8().Max(p.InterleaveHiGrouped(q).AsUint32x8())
	}
	lo, hi := mx4(mx2(gm(0), gm(1)), mx2(gm(2), gm(3))), mx4(mx2(gm(4), gm(5)), mx2(gm(6), gm(7)))
	amax := lo.Select128FromPair(0, 2, hi).Max(lo.Select128FromPair(1, 3, hi))
	finite := amax.AsInt32x8().Less(archsimd.BroadcastInt32x8(0x7f800000))
	sR := roundBF16x8(amax.AsFloat32x8().Div(bc(7.5)))
	ok := uint16(finite.And(sR.NotEqual(archsimd.Float32x8{})).ToBits())
	full := uint16(sR.Less(bc(0x1p-126)).ToBits())&ok != 0 // some scale is subnormal (see rtnPair)
	sR.Store(&sc)

	// Each group as packDiv runs it, with full as in rtnPair (when false, |x/s| < 7.53 and the
	// clamp at -8 and the clip test x/s < -8.5 are left out).
	r8, hiClip, loClip, cmin, cmax := bc(rne+8), bc(7.5), bc(-8.5), bc(-8), bc(7)
	fifteen := archsimd.BroadcastUint32x8(15)
	sh := archsimd.LoadUint32x8(&nibbleShifts)
	packK, evens := archsimd.BroadcastUint32x8(rtnPackXor), archsimd.LoadUint32x8(&evenLanes)
	c28 := archsimd.BroadcastUint64x4(28) // the count of the per-lane 64-bit shift (VPSRLVQ)
	for l := range avx2Groups {
		vs := bcAt(&sc[l])
		var e, sq archsimd.Float32x8
		c := 0
		step := func(v archsimd.Float32x8) archsimd.Uint32x8 {
			f := v.Div(vs)
			m := f.GreaterEqual(hiClip).ToBits()
			if full {
				m |= f.Less(loClip).ToBits()
				f = f.Max(cmin)
			}
			if m != 0 { // rare
				c += bits.OnesCount8(m)
			}
			rf := f.Min(cmax).Add(r8)
			d := v.Sub(rf.Sub(r8).Mul(vs))
			e, sq = e.Add(d.Mul(d)), sq.Add(v.Mul(v))
			return rf.AsUint32x8() // 0x4b400000 plus the nibble
		}
		xl, dl := x[l*g:(l+1)*g], dst[l*g/2:(l+1)*g/2]
		i := 0
		for ; i+32 <= len(xl); i += 32 {
			v := (*[32]float32)(xl[i:])
			// Packed as packNibbles32 packs (rtn16_avx512.go), with one word per vector: the
			// four results shifted and xor-ed, the constant cleared, each 64-bit lane or-ed
			// with itself shifted right by 28; the even lanes' bytes are then the 16 bytes
			// in the order 4k+i for byte 4i+k.
			w := step(archsimd.LoadFloat32x8((*[8]float32)(v[0:]))).Xor(packK)
			w = w.Xor(step(archsimd.LoadFloat32x8((*[8]float32)(v[8:]))).ShiftAllLeft(8))
			w = w.Xor(step(archsimd.LoadFloat32x8((*[8]float32)(v[16:]))).ShiftAllLeft(16))
			q := w.Xor(step(archsimd.LoadFloat32x8((*[8]float32)(v[24:]))).ShiftAllLeft(24)).AsUint64x4()
			p := q.Or(q.ShiftRight(c28)).AsUint32x8().Permute(evens).GetLo().AsUint8x16()
			// (shuf loaded here: a spilled 128-bit vector would be reloaded by a legacy MOVUPS)
			shuf := archsimd.LoadInt8x16((*[16]int8)(rtnPackShuffle[:16]))
			p.PermuteOrZero(shuf).Store((*[16]uint8)(dl[i/2:]))
		}
		for ; i < len(xl); i += 8 {
			w := step(archsimd.LoadFloat32x8((*[8]float32)(xl[i:]))).And(fifteen).ShiftLeft(sh)
			h := w.GetLo().Add(w.GetHi())
			h = h.AddPairs(h)
			binary.LittleEndian.PutUint32(dl[i/2:], h.AddPairs(h).GetElem(0))
		}
		es[l], ss[l], res.clip[l] = e, sq, int32(c)
		res.scale[l] = uint16(*(*uint32)(unsafe.Pointer(&sc[l])) >> 16) // sR is a BF16 value: its top half
	}
	reduce8(&es).Store(lanes8(&res.err))
	reduce8(&ss).Store(lanes8(&res.ss))
	archsimd.ClearAVXUpperBits()
	return ok
}

// reduce8 returns the eight-lane sums of a's eight vectors, lane l the sum of a[l]'s lanes in
// the order ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
func reduce8(a *[avx2Groups]archsimd.Float32x8) archsimd.Float32x8 {
	// AddPairsGrouped of u, v: (u0+u1, u2+u3, v0+v1, v2+v3 | u4+u5, u6+u7, v4+v5, v6+v7).
	lo := a[0].AddPairsGrouped(a[1]).AddPairsGrouped(a[2].AddPairsGrouped(a[3]))
	hi := a[4].AddPairsGrouped(a[5]).AddPairsGrouped(a[6].AddPairsGrouped(a[7]))
	return lo.Select128FromPair(0, 2, hi).Add(lo.Select128FromPair(1, 3, hi))
}
