//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// The activation-weighted search of eight groups at once in 256-bit vectors, for CPUs with AVX2
// and without AVX-512 (or with the loops forced to "avx2"): int4weighted_avx512.go with half the
// lanes. Lane l of every Float32x8 is group k0+l, its column weights transposed beside its
// values; every step of searchWeighted runs on the eight lanes with the scalar comparisons as
// lane masks, so each lane takes the candidates, the choices and the refinements its group takes
// alone, and gets the same bytes and statistics. AVX2 has no mask registers: a mask here is a
// vector of all-ones or all-zero lanes (Mask32x8), and only its ToBits (VMOVMSKPS) leaves the
// registers, to skip work no lane needs; no mask is ever made from bits, which would take
// AVX-512's KMOVD. Integer rounding is VROUNDPS (RoundToEven), which equals level's
// (v + rne) - rne on [-8, 7] except for the sign of a zero level, which changes no sum (see
// search16_avx512.go). Only AVX2 is needed: every product is rounded before it is added, as the
// specification rounds it, so FMA plays no part. There are no package-level vectors: the few
// constants are broadcast in the functions, so nothing runs AVX2 before the loops register.

// avx2Groups is the number of groups searched together with 256-bit vectors. Their results use
// the first eight lanes of batchResult and batchStats.
const avx2Groups = 8

// quantBatchesWeightedAVX2 is quantBatchesWeightedAVX512 eight groups at a time: groups that
// quantGroupWeighted treats apart (non-finite, zero or tiny scale) take the per-group path, so
// a non-finite value is reported for the first group holding one. It returns how many groups
// it did (a multiple of 8).
func quantBatchesWeightedAVX2(out Int4Out, src []float32, ng, cols int, p *Int4Params, d []float32) (int, error) {
	g := p.GroupSize
	gpr := cols / g
	var t, tw, q, wbuf [avx2Groups * maxBatchGroup]float32
	var w [avx2Groups * maxBatchGroup / 8]uint32
	n := avx2Groups * g
	tr, twr, qr, wr := t[:n], tw[:n], q[:n], w[:n/8]
	twRow := rowWeights(d, ng, gpr, avx2Groups, g, transpose8)
	var res batchResult
	var st batchStats // zeroed once, before the vector code; packBatch rewrites it
	k0 := 0
	for ; k0+avx2Groups <= ng; k0 += avx2Groups {
		transpose8(tr, src[k0*g:(k0+avx2Groups)*g], g)
		if twRow != nil {
			c0 := (k0 % gpr) * g
			twr = twRow[c0 : c0+n]
		} else {
			transpose8(twr, batchWeights(wbuf[:n], d, k0, gpr, g), g)
		}
		div := searchBatchWeighted8(&res, tr, twr, g, p)
		if res.ok != 0 {
			packBatch8(&st, tr, qr, wr, g, &res, div)
		}
		archsimd.ClearAVXUpperBits() // storeWeightedBatch is scalar
		if k, err := storeWeightedBatch(out, src, d, wr, k0, avx2Groups, gpr, p, &res, &st); err != nil {
			return k, err
		}
	}
	return k0, nil
}

// transpose8 writes element j of group l of xs (eight groups of g, a multiple of 8) to
// t[8j+l], eight by eight blocks at a time: interleaves of 32-bit, then 64-bit elements within
// each 128-bit half, then the halves exchanged.
func transpose8(t, xs []float32, g int) {
	row := func(l, c int) archsimd.Uint32x8 {
		return archsimd.LoadFloat32x8((*[8]float32)(xs[l*g+c:])).AsUint32x8()
	}
	// quad returns, for rows l..l+3, element i and 4+i of each in the low and high half of c_i.
	quad := func(l, c int) (c0, c1, c2, c3 archsimd.Uint64x4) {
		r0, r1, r2, r3 := row(l, c), row(l+1, c), row(l+2, c), row(l+3, c)
		a, b := r0.InterleaveLoGrouped(r1).AsUint64x4(), r0.InterleaveHiGrouped(r1).AsUint64x4()
		e, f := r2.InterleaveLoGrouped(r3).AsUint64x4(), r2.InterleaveHiGrouped(r3).AsUint64x4()
		return a.InterleaveLoGrouped(e), a.InterleaveHiGrouped(e), b.InterleaveLoGrouped(f), b.InterleaveHiGrouped(f)
	}
	out := func(j int, lo, hi archsimd.Uint64x4) {
		x, y := lo.AsFloat32x8(), hi.AsFloat32x8()
		x.Select128FromPair(0, 2, y).Store((*[8]float32)(t[avx2Groups*j:]))
		x.Select128FromPair(1, 3, y).Store((*[8]float32)(t[avx2Groups*(j+4):]))
	}
	for c := 0; c < g; c += 8 {
		a0, a1, a2, a3 := quad(0, c)
		b0, b1, b2, b3 := quad(4, c)
		out(c, a0, b0)
		out(c+1, a1, b1)
		out(c+2, a2, b2)
		out(c+3, a3, b3)
	}
	archsimd.ClearAVXUpperBits()
}

func ld8(t []float32, j int) archsimd.Float32x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(t[avx2Groups*j:]))
}

// roundBF16x8 is floatcodec.RoundBF16 for finite values (roundBF16x16 in eight lanes).
func roundBF16x8(v archsimd.Float32x8) archsimd.Float32x8 {
	b := v.AsUint32x8()
	return b.Add(archsimd.BroadcastUint32x8(0x7fff)).Add(sra8(b, 16).And(archsimd.BroadcastUint32x8(1))).
		And(archsimd.BroadcastUint32x8(0xffff0000)).AsFloat32x8()
}

// andNot8 returns the lanes of m that are not in n.
func andNot8(m, n archsimd.Mask32x8) archsimd.Mask32x8 {
	return m.ToInt32x8().AndNot(n.ToInt32x8()).ToMask()
}

// noLanes8 returns the empty mask.
func noLanes8() archsimd.Mask32x8 { return archsimd.Int32x8{}.ToMask() }

// batchRTN8 is batchRTN for eight transposed groups: the absolute maximum a, the RTN scale sR
// and the lanes that SearchMSE searches (finite, sR ≠ 0 and a ≥ TinyAbsMax).
func batchRTN8(t []float32, g int) (a, sR archsimd.Float32x8, searched archsimd.Mask32x8) {
	abs := archsimd.BroadcastUint32x8(0x7fffffff)
	var m0, m1 archsimd.Uint32x8
	for j := 0; j < g; j += 2 {
		m0 = m0.Max(ld8(t, j).AsUint32x8().And(abs))
		m1 = m1.Max(ld8(t, j+1).AsUint32x8().And(abs))
	}
	m := m0.Max(m1)
	finite := m.AsInt32x8().Less(archsimd.BroadcastInt32x8(0x7f800000))
	a = m.AsFloat32x8()
	sR = roundBF16x8(a.Div(bc(7.5)))
	return a, sR, finite.And(sR.NotEqual(archsimd.Float32x8{})).And(a.GreaterEqual(bc(TinyAbsMax)))
}

// searchBatchWeighted8 is searchBatchWeighted for eight groups (SearchMSE, unsigned scales),
// its results in the first eight lanes of res. It returns the lanes of res.div as a mask.
func searchBatchWeighted8(res *batchResult, t, tw []float32, g int, p *Int4Params) archsimd.Mask32x8 {
	zero, one := archsimd.Float32x8{}, bc(1)
	a, sR, ok := batchRTN8(t, g)
	res.ok = uint16(ok.ToBits())
	if res.ok == 0 {
		return ok
	}
	bestE, sxq, sqq, rtnErr := wSums8(t, tw, g, sR, zero, true)
	rtnErr.Store(lanes8(&res.rtnErr))
	best := sR
	mul := noLanes8() // lanes whose best is a searched scale (levels x·(1/s))
	// try evaluates candidate s in the lanes of keep and makes it the best where its error is
	// strictly smaller; it returns those lanes.
	try := func(s archsimd.Float32x8, keep archsimd.Mask32x8) archsimd.Mask32x8 {
		inv := one.Div(s)
		e := wErr8(t, tw, s, inv, needsClampLo8(a, inv, keep))
		w := keep.And(e.Less(bestE))
		bestE, best = e.Merge(bestE, w), s.Merge(best, w)
		mul = mul.Or(w)
		return w
	}
	// Lanes whose weights are all equal try the plain candidates.
	unequal := noLanes8()
	if len(p.WPos) > 0 {
		w0 := ld8(tw, 0)
		for j := 1; j < g; j++ {
			unequal = unequal.Or(ld8(tw, j).NotEqual(w0))
		}
		unequal = unequal.And(ok)
	}
	if plain := andNot8(ok, unequal); plain.ToBits() != 0 {
		prev := zero
		for _, k := range p.Pos {
			s := roundBF16x8(a.Mul(bc(k)))
			keep := s.NotEqual(prev).And(s.NotEqual(sR))
			prev = s.Merge(prev, keep)
			if keep = keep.And(plain); keep.ToBits() != 0 {
				try(s, keep)
			}
		}
	}
	if unequal.ToBits() != 0 {
		prev := zero
		kBest := bc(float32(1 / 7.5))
		for _, k := range p.WPos {
			s := roundBF16x8(a.Mul(bc(k)))
			keep := s.NotEqual(prev).And(s.NotEqual(sR))
			prev = s.Merge(prev, keep)
			if keep = keep.And(unequal); keep.ToBits() != 0 {
				kBest = bc(k).Merge(kBest, try(s, keep))
			}
		}
		for i := 1; i <= p.WFineN; i++ {
			// float32(i)·WFine as a vector product (the same IEEE product, no scalar float code)
			step := archsimd.BroadcastInt32x8(int32(i)).ConvertToFloat32().Mul(bcAt(&p.WFine))
			for _, k := range [2]archsimd.Float32x8{kBest.Sub(step), kBest.Add(step)} {
				s := roundBF16x8(a.Mul(k))
				keep := unequal.And(s.Greater(zero)).And(s.NotEqual(best)).And(s.NotEqual(sR))
				if keep.ToBits() != 0 {
					try(s, keep)
				}
			}
		}
	}
	if p.Refine > 0 {
		if mul.ToBits() != 0 {
			_, xq, qq, _ := wSums8(t, tw, g, best, one.Div(best), false)
			sxq, sqq = xq.Merge(sxq, mul), qq.Merge(sqq, mul)
		}
		best, mul = refine8(p.Refine, ok, mul, best, bestE, sxq, sqq, func(s archsimd.Float32x8) (e, xq, qq archsimd.Float32x8) {
			e, xq, qq, _ = wSums8(t, tw, g, s, one.Div(s), false)
			return e, xq, qq
		})
	}
	best.Store(lanes8(&res.best))
	div := andNot8(ok, mul)
	res.div = uint16(div.ToBits())
	return div
}

// lanes8 returns the first eight lanes of a batch's results.
func lanes8(a *[batchGroups]float32) *[avx2Groups]float32 {
	return (*[avx2Groups]float32)(a[:avx2Groups])
}

// refine8 is refine16 in eight lanes, the lane sets as vector masks.
func refine8(n int, act, mul archsimd.Mask32x8, best, bestE, sxq, sqq archsimd.Float32x8, sums func(s archsimd.Float32x8) (e, xq, qq archsimd.Float32x8)) (archsimd.Float32x8, archsimd.Mask32x8) {
	zero := archsimd.Float32x8{}
	for range n {
		act = act.And(sqq.NotEqual(zero))
		if act.ToBits() == 0 {
			break
		}
		s := roundBF16x8(sxq.Div(sqq))
		act = andNot8(act, s.Equal(best).Or(s.LessEqual(zero)))
		if act.ToBits() == 0 {
			break
		}
		e, sxq2, sqq2 := sums(s)
		act = act.And(e.Less(bestE))
		bestE, best = e.Merge(bestE, act), s.Merge(best, act)
		sxq, sqq = sxq2.Merge(sxq, act), sqq2.Merge(sqq, act)
		mul = mul.Or(act)
	}
	return best, mul
}

// wErr8 is wSums' weighted error alone for each lane's group with scale s and reciprocal inv,
// the eight spec accumulators summed four at a time, without the clamp at -8 unless clampLo
// (needsClampLo8).
func wErr8(t, tw []float32, s, inv archsimd.Float32x8, clampLo bool) archsimd.Float32x8 {
	lo, hi := bc(-8), bc(7)
	return wErrHalf8(t, tw, 0, s, inv, lo, hi, clampLo).Add(wErrHalf8(t, tw, 4, s, inv, lo, hi, clampLo))
}

// wErrHalf8 returns (a_o+a_(o+1))+(a_(o+2)+a_(o+3)) of wErr8's accumulators, o = off.
func wErrHalf8(t, tw []float32, off int, s, inv, lo, hi archsimd.Float32x8, clampLo bool) archsimd.Float32x8 {
	var e0, e1, e2, e3 archsimd.Float32x8
	// term is one row's w·(x−q·s)².
	term := func(v, w archsimd.Float32x8) archsimd.Float32x8 {
		f := v.Mul(inv)
		if clampLo {
			f = f.Max(lo)
		}
		return w.Mul(sq8(v, f.Min(hi).RoundToEven(), s))
	}
	x, y := t[avx2Groups*off:], tw[avx2Groups*off:]
	y = y[:len(x)]
	for i := 0; i+4*avx2Groups <= len(x); i += 8 * avx2Groups {
		b, c := (*[4 * avx2Groups]float32)(x[i:]), (*[4 * avx2Groups]float32)(y[i:])
		e0 = e0.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[0:])), archsimd.LoadFloat32x8((*[8]float32)(c[0:]))))
		e1 = e1.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[8:])), archsimd.LoadFloat32x8((*[8]float32)(c[8:]))))
		e2 = e2.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[16:])), archsimd.LoadFloat32x8((*[8]float32)(c[16:]))))
		e3 = e3.Add(term(archsimd.LoadFloat32x8((*[8]float32)(b[24:])), archsimd.LoadFloat32x8((*[8]float32)(c[24:]))))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// sq8 returns (v - q·s)².
func sq8(v, q, s archsimd.Float32x8) archsimd.Float32x8 {
	d := v.Sub(q.Mul(s))
	return d.Mul(d)
}

// wSums8 is wSums16 in eight lanes: Σw(x−q·s)², Σw·x·q, Σw·q² and the unweighted Σ(x−q·s)² of
// the levels level(x/s) (div) or level(x·inv). The sums run one spec lane at a time, so that
// the four accumulators stay in registers.
//
// The lanes are added as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) in registers: an array of vectors
// would be zeroed by legacy-SSE stores, on the path of vector code.
func wSums8(t, tw []float32, g int, s, inv archsimd.Float32x8, div bool) (e, xq, qq, eu archsimd.Float32x8) {
	e0, x0, q0, u0 := wSumsQuad8(t, tw, g, 0, s, inv, div)
	e1, x1, q1, u1 := wSumsQuad8(t, tw, g, 4, s, inv, div)
	return e0.Add(e1), x0.Add(x1), q0.Add(q1), u0.Add(u1)
}

// wSumsQuad8 returns spec lanes o..o+3 of wSums8's sums added as (lo+lo+1)+(lo+2+lo+3).
func wSumsQuad8(t, tw []float32, g, o int, s, inv archsimd.Float32x8, div bool) (e, xq, qq, eu archsimd.Float32x8) {
	e0, x0, q0, u0 := wSumsLane8(t, tw, g, o, s, inv, div)
	e1, x1, q1, u1 := wSumsLane8(t, tw, g, o+1, s, inv, div)
	ea, xa, qa, ua := e0.Add(e1), x0.Add(x1), q0.Add(q1), u0.Add(u1)
	e2, x2, q2, u2 := wSumsLane8(t, tw, g, o+2, s, inv, div)
	e3, x3, q3, u3 := wSumsLane8(t, tw, g, o+3, s, inv, div)
	return ea.Add(e2.Add(e3)), xa.Add(x2.Add(x3)), qa.Add(q2.Add(q3)), ua.Add(u2.Add(u3))
}

// wSumsLane8 returns spec lane o of wSums8's four sums. The products are rounded one at a time
// as wSums rounds them: w·(d·d), (w·x)·q and (w·q)·q.
func wSumsLane8(t, tw []float32, g, o int, s, inv archsimd.Float32x8, div bool) (e, xq, qq, eu archsimd.Float32x8) {
	lo, hi := bc(-8), bc(7)
	for j := o; j < g; j += 8 {
		v, w := ld8(t, j), ld8(tw, j)
		f := v.Mul(inv)
		if div {
			f = v.Div(s)
		}
		q := f.Max(lo).Min(hi).RoundToEven()
		dd := sq8(v, q, s)
		e = e.Add(w.Mul(dd))
		eu = eu.Add(dd)
		xq = xq.Add(w.Mul(v).Mul(q))
		qq = qq.Add(w.Mul(q).Mul(q))
	}
	return e, xq, qq, eu
}

// packBatch8 is packBatch for eight transposed groups (div: the lanes of res.div): the words go
// to w (word i of group l at w[8i+l]), the levels to q, then the error and Σx² are summed from t
// and q into the first eight lanes of st.
func packBatch8(st *batchStats, t, q []float32, w []uint32, g int, res *batchResult, div archsimd.Mask32x8) {
	s := archsimd.LoadFloat32x8(lanes8(&res.best))
	inv := bc(1).Div(s)
	hi, lo := bc(7.5), bc(-8.5)
	cmin, cmax, r := bc(-8), bc(7), bc(rne)
	eight, fifteen := archsimd.BroadcastUint32x8(8), archsimd.BroadcastUint32x8(15)
	var clip archsimd.Int32x8
	for j := 0; j < g; j += 8 {
		var word archsimd.Uint32x8
		for jj := range 8 {
			v := ld8(t, j+jj)
			f := v.Mul(inv)
			if res.div != 0 {
				f = v.Div(s).Merge(f, div)
			}
			clip = clip.Sub(f.GreaterEqual(hi).Or(f.Less(lo)).ToInt32x8()) // a set lane is -1
			b := f.Max(cmin).Min(cmax).Add(r)
			b.Sub(r).Store((*[8]float32)(q[avx2Groups*(j+jj):]))
			// (a per-lane shift: ShiftAllLeft by a variable takes its count through a legacy MOVQ)
			word = word.Or(b.AsUint32x8().Add(eight).And(fifteen).ShiftLeft(archsimd.BroadcastUint32x8(uint32(4 * jj))))
		}
		word.Store((*[8]uint32)(w[avx2Groups*(j/8):]))
	}
	clip.Store((*[avx2Groups]int32)(st.clip[:avx2Groups]))
	errQ8(t, q, g, s).Store(lanes8(&st.err))
	sumSq8(t, g).Store(lanes8(&st.sumSq))
}

// errQ8 is errQ16 in eight lanes, all eight spec accumulators at once: Σ(x−q·s)² of levels q.
func errQ8(t, q []float32, g int, s archsimd.Float32x8) archsimd.Float32x8 {
	// Eight accumulators in registers (an array of vectors would be zeroed by legacy SSE).
	var a0, a1, a2, a3, a4, a5, a6, a7 archsimd.Float32x8
	for j := 0; j < g; j += 8 {
		a0 = a0.Add(sq8(ld8(t, j), ld8(q, j), s))
		a1 = a1.Add(sq8(ld8(t, j+1), ld8(q, j+1), s))
		a2 = a2.Add(sq8(ld8(t, j+2), ld8(q, j+2), s))
		a3 = a3.Add(sq8(ld8(t, j+3), ld8(q, j+3), s))
		a4 = a4.Add(sq8(ld8(t, j+4), ld8(q, j+4), s))
		a5 = a5.Add(sq8(ld8(t, j+5), ld8(q, j+5), s))
		a6 = a6.Add(sq8(ld8(t, j+6), ld8(q, j+6), s))
		a7 = a7.Add(sq8(ld8(t, j+7), ld8(q, j+7), s))
	}
	return a0.Add(a1).Add(a2.Add(a3)).Add(a4.Add(a5).Add(a6.Add(a7)))
}

// sumSq8 is errQ8 for Σx².
func sumSq8(t []float32, g int) archsimd.Float32x8 {
	var a0, a1, a2, a3, a4, a5, a6, a7 archsimd.Float32x8
	sq := func(i int) archsimd.Float32x8 { v := ld8(t, i); return v.Mul(v) }
	for j := 0; j < g; j += 8 {
		a0, a1, a2, a3 = a0.Add(sq(j)), a1.Add(sq(j+1)), a2.Add(sq(j+2)), a3.Add(sq(j+3))
		a4, a5, a6, a7 = a4.Add(sq(j+4)), a5.Add(sq(j+5)), a6.Add(sq(j+6)), a7.Add(sq(j+7))
	}
	return a0.Add(a1).Add(a2.Add(a3)).Add(a4.Add(a5).Add(a6.Add(a7)))
}
