//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"simd/archsimd"
	"unsafe"

	"pdq/internal/floatcodec"
)

// The activation-weighted search (searchWeighted) of sixteen groups at once, as
// search16_avx512.go does the plain one: lane l of every vector is group k0+l, its column
// weights transposed beside its values, and every step of searchWeighted runs on all sixteen
// lanes with the scalar comparisons as lane masks. A lane follows the candidate sequence its
// group's weights select (the plain candidates when they are all equal, else the coarse and
// fine stages), so a batch may run both sequences, each masked to its lanes. The candidates'
// errors are summed alone; Σw·x·q and Σw·q², which only the refinement needs, are summed for the
// best scale once the candidates are done (the same operations on the same scale and levels, so
// the same bits as the scalar loop's running copies). The candidate loops and the sums are
// assembly (search_weighted_amd64.s).

// callQuantBatchesWeighted quantizes whole batches of groups with the batched weighted search
// where it applies (SearchMSE, unsigned scales, groups of at most maxBatchGroup: sixteen at a
// time on AVX-512, eight on AVX2, int4weighted_avx2.go) and returns how many groups it did.
func callQuantBatchesWeighted(out Int4Out, src []float32, ng, cols int, p *Int4Params, d []float32) (int, error) {
	if noBatchSearch || p.Signed || p.Search != SearchMSE || p.GroupSize > maxBatchGroup {
		return 0, nil
	}
	switch lp {
	case &avx512Loops:
		return quantBatchesWeightedAVX512(out, src, ng, cols, p, d)
	case &avx2Loops:
		return quantBatchesWeightedAVX2(out, src, ng, cols, p, d)
	}
	return 0, nil
}

// quantBatchesWeightedAVX512 is quantBatchesAVX512 for QuantizeInt4Weighted: groups that
// quantGroupWeighted treats apart (non-finite, zero or tiny scale) take the per-group path.
func quantBatchesWeightedAVX512(out Int4Out, src []float32, ng, cols int, p *Int4Params, d []float32) (int, error) {
	g := p.GroupSize
	gpr := cols / g
	var t, tw, q, wbuf [batchGroups * maxBatchGroup]float32
	var w [batchGroups * maxBatchGroup / 8]uint32
	n := batchGroups * g
	tr, twr, qr, wr := t[:n], tw[:n], q[:n], w[:n/8]
	twRow := rowWeights(d, ng, gpr, batchGroups, g, transpose16)
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(out.Packed))), len(out.Packed)/4)
	var res batchResult
	var st batchStats   // zeroed once, before the vector code; packBatch rewrites it
	var sc storeScratch // likewise
	k0 := 0
	for ; k0+batchGroups <= ng; k0 += batchGroups {
		transpose16(tr, src[k0*g:(k0+batchGroups)*g], g)
		if twRow != nil {
			c0 := (k0 % gpr) * g
			twr = twRow[c0 : c0+n]
		} else {
			transpose16(twr, batchWeights(wbuf[:n], d, k0, gpr, g), g)
		}
		searchBatchWeighted(&res, tr, twr, g, p)
		if res.ok != 0 {
			packBatch(&st, tr, qr, wr, g, &res)
		}
		bw := wr
		if g == 32 && res.ok != 0 {
			// All sixteen groups' words at once, as quantBatchesAVX512 stores them.
			storeWords32(words[k0*4:(k0+16)*4], wr)
			bw = nil
		}
		if res.ok == 1<<batchGroups-1 && (g == 32 || g == 128) {
			// RTNErr: the batch's error where the RTN scale stayed, else the RTN error.
			err := archsimd.LoadFloat32x16(&st.err)
			rtn := err.Merge(archsimd.LoadFloat32x16(&res.rtnErr), archsimd.Mask32x16FromBits(res.div))
			storeBatch16(out, k0, g, wr, &st, rtn, archsimd.LoadFloat32x16(&res.best), &sc)
			archsimd.ClearAVXUpperBits() // transpose16 has a scalar path
			continue
		}
		archsimd.ClearAVXUpperBits() // storeWeightedBatch is scalar
		if k, err := storeWeightedBatch(out, src, d, bw, k0, batchGroups, gpr, p, &res, &st); err != nil {
			return k, err
		}
	}
	return k0, nil
}

// rowWeights returns the column weights d transposed for batches of nb groups, position by
// position along the row, when every batch lies in one row and there is more than one row (the
// batches of a row position then share their weights, transposed once here); else nil.
func rowWeights(d []float32, ng, gpr, nb, g int, transpose func(t, xs []float32, g int)) []float32 {
	if gpr%nb != 0 || ng <= gpr {
		return nil
	}
	tw := make([]float32, len(d))
	for c0, n := 0, nb*g; c0 < len(d); c0 += n {
		transpose(tw[c0:c0+n], d[c0:c0+n], g)
	}
	return tw
}

// storeWeightedBatch writes the output of the nb groups from k0 on: the lanes of res.ok from
// the batch (the scales res.best, word i of lane l at wr[nb·i+l] unless wr is nil, when the
// batch's words are in out.Packed already, the statistics st), the other groups through
// quantGroupWeighted. On a non-finite value it returns the group's index and the error.
func storeWeightedBatch(out Int4Out, src, d []float32, wr []uint32, k0, nb, gpr int, p *Int4Params, res *batchResult, st *batchStats) (int, error) {
	g := p.GroupSize
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(out.Packed))), len(out.Packed)/4)
	for l := range nb {
		k := k0 + l
		var s float32
		if res.ok>>l&1 != 0 {
			s = res.best[l]
			if wr != nil {
				wk := words[k*g/8 : (k+1)*g/8]
				for i := range wk {
					wk[i] = wr[nb*i+l]
				}
			}
			out.Stats[k] = GroupStats{SumSq: st.sumSq[l], Err: st.err[l], RTNErr: st.err[l], Clipped: st.clip[l]}
			if res.div>>l&1 == 0 {
				out.Stats[k].RTNErr = res.rtnErr[l]
			}
		} else {
			x := src[k*g : (k+1)*g : (k+1)*g]
			c0 := (k % gpr) * g
			var bad int
			s, out.Stats[k], bad = quantGroupWeighted(out.Packed[k*g/2:(k+1)*g/2], x, d[c0:c0+g:c0+g], p)
			if bad >= 0 {
				return k, &NonFiniteError{Index: int64(k*g + bad), Value: x[bad]}
			}
		}
		binary.LittleEndian.PutUint16(out.Scales[2*k:], floatcodec.Float32ToBF16(s))
	}
	return 0, nil
}

// batchWeights returns the column weights of the len(buf)/g groups from k0 on one after
// another: a slice of d when they lie in one row, else copied into buf.
func batchWeights(buf, d []float32, k0, gpr, g int) []float32 {
	c0 := (k0 % gpr) * g
	if c0+len(buf) <= len(d) {
		return d[c0 : c0+len(buf)]
	}
	for l := range len(buf) / g {
		c := ((k0 + l) % gpr) * g
		copy(buf[l*g:(l+1)*g], d[c:c+g])
	}
	return buf
}

// searchBatchWeighted runs quantGroupWeighted's checks and searchWeighted (SearchMSE, unsigned
// scales) on the sixteen transposed groups of t with their transposed weights tw. res.rtnErr
// holds the unweighted error of the RTN scale, the RTNErr of the lanes that leave it.
func searchBatchWeighted(res *batchResult, t, tw []float32, g int, p *Int4Params) {
	a, sR, _, ok := batchRTN(t, g)
	res.ok = ok
	if ok == 0 {
		return
	}
	st := &res.asm
	bestE, sxq, sqq, rtnErr := wSums16(t, tw, g, sR, true, st)
	rtnErr.StoreSlice(res.rtnErr[:])
	best := sR
	// The candidates run in the assembly loops (search_weighted_amd64.s), bestE, best and mul in
	// res.asm until they are done.
	a.Store(&st.a)
	sR.Store(&st.sR)
	bestE.Store(&st.bestE)
	best.Store(&st.best)
	st.mul = 0
	// Lanes whose weights are all equal try the plain candidates.
	var unequal uint16
	if len(p.WPos) > 0 {
		w0 := ld16(tw, 0)
		ne := archsimd.Mask32x16FromBits(0)
		for j := 1; j < g; j++ {
			ne = ne.Or(ld16(tw, j).NotEqual(w0))
		}
		unequal = ne.ToBits() & ok
	}
	if plain := ok &^ unequal; plain != 0 && len(p.Pos) > 0 {
		wSearchPosAsm(&t[0], &tw[0], g, &p.Pos[0], len(p.Pos), uint32(plain), st)
	}
	if unequal != 0 {
		bc16(float32(1 / 7.5)).Store(&st.kBest)
		if len(p.WPos) > 0 {
			wSearchPosAsm(&t[0], &tw[0], g, &p.WPos[0], len(p.WPos), uint32(unequal), st)
		}
		if p.WFineN > 0 {
			wFineAsm(&t[0], &tw[0], g, &p.WFine, p.WFineN, uint32(unequal), st)
		}
	}
	bestE, best = archsimd.LoadFloat32x16(&st.bestE), archsimd.LoadFloat32x16(&st.best)
	mul := uint16(st.mul)
	if p.Refine > 0 {
		if mul != 0 {
			_, xq, qq, _ := wSums16(t, tw, g, best, false, st)
			w := archsimd.Mask32x16FromBits(mul)
			sxq, sqq = xq.Merge(sxq, w), qq.Merge(sqq, w)
		}
		best, _, mul = refine16(p.Refine, ok, mul, best, bestE, sxq, sqq, func(s archsimd.Float32x16) (e, xq, qq archsimd.Float32x16) {
			e, xq, qq, _ = wSums16(t, tw, g, s, false, st)
			return e, xq, qq
		})
	}
	best.StoreSlice(res.best[:])
	res.div = ok &^ mul
}

// wSums16 is wSums for each lane (div: the RTN levels x/s, else x·(1/s)), and also returns the
// unweighted error Σ(x−q·s)² of the same levels (errDiv's sum when div is set): wSumsAsm
// through st.
func wSums16(t, tw []float32, g int, s archsimd.Float32x16, div bool, st *searchState) (e, xq, qq, eu archsimd.Float32x16) {
	s.Store(&st.s)
	wSumsAsm(&t[0], &tw[0], g, div, st)
	return archsimd.LoadFloat32x16(&st.e), archsimd.LoadFloat32x16(&st.xq), archsimd.LoadFloat32x16(&st.qq), archsimd.LoadFloat32x16(&st.eu)
}
