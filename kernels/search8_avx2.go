//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"simd/archsimd"

	"pdq/internal/floatcodec"
)

// The plain MSE scale search of eight groups at once in 256-bit vectors, for CPUs with AVX2 and
// without AVX-512 (or with the loops forced to "avx2"): search16_avx512.go with half the lanes,
// built from the pieces of the AVX2 weighted batch (int4weighted_avx2.go: transpose8, batchRTN8,
// refine8, packBatch8). Lane l of every Float32x8 is group k0+l; the specification's eight
// per-group sums are eight accumulator vectors (element j to accumulator j%8, combined as
// ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7))), and every choice of search is a lane mask made with the
// scalar comparison: a candidate replaces the best only where its error is strictly smaller,
// skipped candidates never do, a refinement stops where the scalar loop breaks. So each lane
// takes the scale, the level rule and the statistics its group takes alone. As there, masks
// are all-ones or all-zero lanes and only their ToBits (VMOVMSKPS) leaves the registers; every
// product is rounded before it is added (no FMA); integer rounding is VROUNDPS, equal to
// level's (v + rne) - rne on [-8, 7] but for the sign of a zero level, which changes no sum;
// and there are no package-level vectors.

// quantBatchesAVX2 quantizes the groups of src (SearchMSE, unsigned scales, groups of at most
// maxBatchGroup) in whole batches of eight and returns how many it did (a multiple of 8, at most
// ng); the caller does the rest one group at a time. Groups that quantGroup treats apart
// (non-finite, zero or tiny scale) take the per-group path, so a non-finite value is reported
// for the first group holding one, as QuantizeInt4 does.
func quantBatchesAVX2(out Int4Out, src []float32, ng int, p *Int4Params) (int, error) {
	g := p.GroupSize
	var t, q [avx2Groups * maxBatchGroup]float32
	var w [avx2Groups * maxBatchGroup / 8]uint32
	n := avx2Groups * g
	tr, qr, wr := t[:n], q[:n], w[:n/8]
	var res batchResult
	var st batchStats // zeroed once, before the vector code; packBatch rewrites it
	k0 := 0
	for ; k0+avx2Groups <= ng; k0 += avx2Groups {
		transpose8(tr, src[k0*g:(k0+avx2Groups)*g], g)
		div := searchBatch8(&res, tr, g, p)
		if res.ok != 0 {
			packBatch8(&st, tr, qr, wr, g, &res, div)
		}
		archsimd.ClearAVXUpperBits() // the per-group stores are scalar
		for l := range avx2Groups {
			k := k0 + l
			if res.ok>>l&1 != 0 {
				s := res.best[l]
				b := out.Packed[k*g/2 : (k+1)*g/2]
				for i := range g / 8 {
					binary.LittleEndian.PutUint32(b[4*i:], wr[avx2Groups*i+l])
				}
				out.Stats[k] = GroupStats{SumSq: st.sumSq[l], Err: st.err[l], RTNErr: res.rtnErr[l], Clipped: st.clip[l]}
				binary.LittleEndian.PutUint16(out.Scales[2*k:], floatcodec.Float32ToBF16(s))
			} else if err := quantGroupAt(out, src, k, p); err != nil {
				return k, err
			}
		}
	}
	return k0, nil
}

// searchBatch8 runs quantGroup's checks and search (SearchMSE, unsigned scales) on the eight
// transposed groups of t, its results in the first eight lanes of res (res.rtnErr: the error of
// the RTN scale). It returns the lanes of res.div as a mask.
func searchBatch8(res *batchResult, t []float32, g int, p *Int4Params) archsimd.Mask32x8 {
	zero, one := archsimd.Float32x8{}, bc(1)
	a, sR, ok := batchRTN8(t, g)
	res.ok = uint16(ok.ToBits())
	if res.ok == 0 {
		return ok
	}
	bestE := errDiv8(t, sR)
	bestE.Store(lanes8(&res.rtnErr))
	best := sR
	mul := noLanes8() // lanes whose best is a searched scale (levels x·(1/s))
	prev := zero
	for _, k := range p.Pos {
		s := roundBF16x8(a.Mul(bc(k)))
		keep := s.NotEqual(prev).And(s.NotEqual(sR))
		prev = s.Merge(prev, keep)
		if keep = keep.And(ok); keep.ToBits() == 0 {
			continue
		}
		inv := one.Div(s)
		// Where a·inv ≤ 8.5, every x·inv is at least -8.5 (rounding is monotonic), which rounds
		// to the level -8 with or without the clamp at -8: it is left out.
		clampLo := keep.And(a.Mul(inv).Greater(bc(8.5))).ToBits() != 0
		e := errMul8(t, s, inv, clampLo)
		w := keep.And(e.Less(bestE))
		bestE, best = e.Merge(bestE, w), s.Merge(best, w)
		mul = mul.Or(w)
	}
	if p.Refine > 0 {
		_, sxq, sqq := errSums8(t, g, best, one.Div(best), andNot8(ok, mul))
		best, mul = refine8(p.Refine, ok, mul, best, bestE, sxq, sqq, func(s archsimd.Float32x8) (e, xq, qq archsimd.Float32x8) {
			return errSums8(t, g, s, one.Div(s), noLanes8())
		})
	}
	best.Store(lanes8(&res.best))
	div := andNot8(ok, mul)
	res.div = uint16(div.ToBits())
	return div
}

// errMul8 is errMul of each lane's group with scale s and reciprocal inv (without the clamp at
// -8 unless clampLo: see searchBatch8). The eight accumulators are summed four at a time (rows
// j%8 < 4, then the others), which keeps them, the constants and the temporaries in the sixteen
// registers; the sum is the same ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).
func errMul8(t []float32, s, inv archsimd.Float32x8, clampLo bool) archsimd.Float32x8 {
	lo, hi := bc(-8), bc(7)
	return errMulHalf8(t, 0, s, inv, lo, hi, clampLo).Add(errMulHalf8(t, 4, s, inv, lo, hi, clampLo))
}

// errDiv8 is errDiv: errMul8 for the RTN levels level(x/s).
func errDiv8(t []float32, s archsimd.Float32x8) archsimd.Float32x8 {
	lo, hi := bc(-8), bc(7)
	return errDivHalf8(t, 0, s, lo, hi).Add(errDivHalf8(t, 4, s, lo, hi))
}

// errMulHalf8 returns (a_o+a_(o+1))+(a_(o+2)+a_(o+3)) of errMul8's accumulators, o = off, for the
// levels level(x·inv). The clamp bounds come as arguments, so that they stay in registers.
func errMulHalf8(t []float32, off int, s, inv, lo, hi archsimd.Float32x8, clampLo bool) archsimd.Float32x8 {
	var e0, e1, e2, e3 archsimd.Float32x8
	term := func(v archsimd.Float32x8) archsimd.Float32x8 {
		f := v.Mul(inv)
		if clampLo {
			f = f.Max(lo)
		}
		return sq8(v, f.Min(hi).RoundToEven(), s)
	}
	x := t[avx2Groups*off:]
	for i := 0; i+4*avx2Groups <= len(x); i += 8 * avx2Groups {
		b := (*[4 * avx2Groups]float32)(x[i:])
		e0 = e0.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[0:]))))
		e1 = e1.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[8:]))))
		e2 = e2.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[16:]))))
		e3 = e3.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[24:]))))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// errDivHalf8 is errMulHalf8 for the RTN levels level(x/s).
func errDivHalf8(t []float32, off int, s, lo, hi archsimd.Float32x8) archsimd.Float32x8 {
	var e0, e1, e2, e3 archsimd.Float32x8
	term := func(v archsimd.Float32x8) archsimd.Float32x8 {
		return sq8(v, v.Div(s).Max(lo).Min(hi).RoundToEven(), s)
	}
	x := t[avx2Groups*off:]
	for i := 0; i+4*avx2Groups <= len(x); i += 8 * avx2Groups {
		b := (*[4 * avx2Groups]float32)(x[i:])
		e0 = e0.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[0:]))))
		e1 = e1.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[8:]))))
		e2 = e2.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[16:]))))
		e3 = e3.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[24:]))))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// errSums8 is errSumsMul of each lane (errSumsDiv in the lanes of divLanes): Σ(x−q·s)², Σx·q
// and Σq². The 24 accumulators are summed two spec lanes at a time, to stay in registers.
func errSums8(t []float32, g int, s, inv archsimd.Float32x8, divLanes archsimd.Mask32x8) (e, xq, qq archsimd.Float32x8) {
	anyDiv := divLanes.ToBits() != 0
	e0, x0, q0 := errSumsPair8(t, g, 0, s, inv, divLanes, anyDiv)
	e1, x1, q1 := errSumsPair8(t, g, 2, s, inv, divLanes, anyDiv)
	e2, x2, q2 := errSumsPair8(t, g, 4, s, inv, divLanes, anyDiv)
	e3, x3, q3 := errSumsPair8(t, g, 6, s, inv, divLanes, anyDiv)
	return e0.Add(e1).Add(e2.Add(e3)), x0.Add(x1).Add(x2.Add(x3)), q0.Add(q1).Add(q2.Add(q3))
}

// errSumsPair8 returns a_o + a_(o+1) of errSums8's three sums, o = off.
func errSumsPair8(t []float32, g, off int, s, inv archsimd.Float32x8, dm archsimd.Mask32x8, anyDiv bool) (e, xq, qq archsimd.Float32x8) {
	var ea, eb, xa, xb, qa, qb archsimd.Float32x8
	lo, hi := bc(-8), bc(7)
	for j := off; j < g; j += 8 {
		b := (*[2 * avx2Groups]float32)(t[avx2Groups*j:])
		va, vb := archsimd.LoadFloat32x8((*[8]float32)(b[0:])), archsimd.LoadFloat32x8((*[8]float32)(b[8:]))
		fa, fb := va.Mul(inv), vb.Mul(inv)
		if anyDiv {
			fa, fb = va.Div(s).Merge(fa, dm), vb.Div(s).Merge(fb, dm)
		}
		qva, qvb := fa.Max(lo).Min(hi).RoundToEven(), fb.Max(lo).Min(hi).RoundToEven()
		ea, eb = ea.Add(sq8(va, qva, s)), eb.Add(sq8(vb, qvb, s))
		xa, xb = xa.Add(va.Mul(qva)), xb.Add(vb.Mul(qvb))
		qa, qb = qa.Add(qva.Mul(qva)), qb.Add(qvb.Mul(qvb))
	}
	return ea.Add(eb), xa.Add(xb), qa.Add(qb)
}
