//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"simd/archsimd"
	"unsafe"

	"pdq/internal/floatcodec"
)

// The MSE scale search of sixteen groups at once. The per-group search is a chain of dependent
// steps (the RTN error, each candidate's error, the choice, the refinements), each a short sum
// over one group: latency, horizontal reductions and unpredictable branches dominate it. Here
// lane l of every vector is group k0+l: the sixteen groups are transposed into a scratch block
// (row j holds element j of each group), and every step of search runs on all sixteen lanes,
// the specification's eight per-group sums being eight accumulator vectors (element j goes to
// accumulator j%8, combined as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7))). Each lane performs exactly
// the scalar operations of search in the scalar order, the choices become lane masks with the
// same comparisons (a candidate replaces the best only when its error is strictly smaller,
// skipped candidates never do, a refinement stops where the scalar loop breaks), so every lane
// chooses the scale and the level rule search chooses for its group. Rounding to an integer
// uses VRNDSCALEPS (round to nearest even), which equals level's (v + rne) - rne on [-8, 7]
// except for the sign of a zero level; a ±0 level changes no error term, x·q or q² sum. The
// loop over the candidates and the refinement sums are assembly (search_amd64.s).

// batchGroups is the number of groups searched together; maxBatchGroup bounds the group size
// (larger groups, such as per-channel ones, use the per-group search).
const (
	batchGroups   = 16
	maxBatchGroup = 128
)

// quantBatchesAVX512 quantizes the groups of src in whole batches of sixteen and returns how
// many it did (a multiple of 16, at most ng); the caller does the rest one group at a time.
// Groups that quantGroup treats apart (non-finite, zero scale, and for SearchMSE tiny scales)
// take the per-group path, so a non-finite value is reported for the first group holding one,
// as QuantizeInt4 does.
func quantBatchesAVX512(out Int4Out, src []float32, ng int, p *Int4Params) (int, error) {
	g := p.GroupSize
	var t, q [batchGroups * maxBatchGroup]float32
	var w [batchGroups * maxBatchGroup / 8]uint32
	tr, qr, wr := t[:batchGroups*g], q[:batchGroups*g], w[:batchGroups*g/8]
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(out.Packed))), len(out.Packed)/4)
	var res batchResult
	var st batchStats   // zeroed once, before the vector code; packBatch rewrites it
	var sc storeScratch // likewise
	k0 := 0
	for ; k0+batchGroups <= ng; k0 += batchGroups {
		transpose16(tr, src[k0*g:(k0+batchGroups)*g], g)
		searchBatch(&res, tr, g, p)
		if res.ok != 0 {
			packBatch(&st, tr, qr, wr, g, &res)
		}
		if g == 32 && res.ok != 0 {
			// All sixteen groups' words at once; the per-group path below rewrites its own.
			storeWords32(words[k0*4:(k0+16)*4], wr)
		}
		if res.ok == 1<<batchGroups-1 && (g == 32 || g == 128) {
			rtn := archsimd.LoadFloat32x16(&st.err)
			if p.Search == SearchMSE {
				rtn = archsimd.LoadFloat32x16(&res.rtnErr)
			}
			storeBatch16(out, k0, g, wr, &st, rtn, archsimd.LoadFloat32x16(&res.best), &sc)
			archsimd.ClearAVXUpperBits() // transpose16 has a scalar path
			continue
		}
		archsimd.ClearAVXUpperBits() // the per-group stores are scalar
		for l := range batchGroups {
			k := k0 + l
			if res.ok>>l&1 != 0 {
				s := res.best[l]
				if g != 32 {
					wk := words[k*g/8 : (k+1)*g/8]
					for i := range wk {
						wk[i] = wr[batchGroups*i+l]
					}
				}
				out.Stats[k] = GroupStats{SumSq: st.sumSq[l], Err: st.err[l], RTNErr: st.err[l], Clipped: st.clip[l]}
				if p.Search == SearchMSE {
					out.Stats[k].RTNErr = res.rtnErr[l]
				}
				binary.LittleEndian.PutUint16(out.Scales[2*k:], floatcodec.Float32ToBF16(s))
			} else if err := quantGroupAt(out, src, k, p); err != nil {
				return k, err
			}
		}
	}
	archsimd.ClearAVXUpperBits()
	return k0, nil
}

// storeBatch16 writes the output of a batch whose sixteen groups, from k0 on, all came out of
// it, with vectors: for groups of 128 the words (word i of group l at w[16i+l]; groups of 32
// have theirs from storeWords32), the statistics (st, and rtn for RTNErr) and the scales best,
// BF16 values whose codes are their upper halves. It leaves the upper register state to its
// caller.
func storeBatch16(out Int4Out, k0, g int, w []uint32, st *batchStats, rtn, best archsimd.Float32x16, sc *storeScratch) {
	if g == 128 {
		words := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(out.Packed))), len(out.Packed)/4)
		transpose16Blocks(words[k0*16:(k0+16)*16], unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(w))), len(w)), 16, &sc.mid)
	}
	f := &sc.stats
	archsimd.LoadFloat32x16(&st.sumSq).AsUint32x16().Store((*[16]uint32)(f[0:]))
	archsimd.LoadFloat32x16(&st.err).AsUint32x16().Store((*[16]uint32)(f[16:]))
	rtn.AsUint32x16().Store((*[16]uint32)(f[32:]))
	archsimd.LoadInt32x16(&st.clip).AsUint32x16().Store((*[16]uint32)(f[48:]))
	stats := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(out.Stats))), 4*len(out.Stats))
	storeWords32(stats[4*k0:4*(k0+batchGroups)], f[:])
	codes := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(out.Scales))), len(out.Scales)/2)
	sra16(best.AsUint32x16(), 16).TruncateToUint16().StoreSlice(codes[k0 : k0+batchGroups])
}

// storeScratch is storeBatch16's scratch memory, in its caller's frame (zeroed once, before the
// vector code).
type storeScratch struct {
	mid   [16 * 16]float32
	stats [4 * batchGroups]uint32
}

// storeWords32 writes the words of sixteen groups of 32 (four each, word i of group l at
// w[16i+l]) in output order: dst[4l+i] = w[16i+l].
func storeWords32(dst, w []uint32) {
	ld := func(i int) archsimd.Uint32x16 { return archsimd.LoadUint32x16((*[16]uint32)(w[16*i:])) }
	w0, w1, w2, w3 := ld(0), ld(1), ld(2), ld(3)
	// a[2x+i] = w_i[x] for i in {0, 1}, b likewise for w2, w3; lo holds x < 8, hi the rest.
	alo, ahi := w0.ConcatPermute(w1, words32Idx[0]), w0.ConcatPermute(w1, words32Idx[1])
	blo, bhi := w2.ConcatPermute(w3, words32Idx[0]), w2.ConcatPermute(w3, words32Idx[1])
	d := (*[64]uint32)(dst)
	alo.ConcatPermute(blo, words32Idx[2]).Store((*[16]uint32)(d[0:]))
	alo.ConcatPermute(blo, words32Idx[3]).Store((*[16]uint32)(d[16:]))
	ahi.ConcatPermute(bhi, words32Idx[2]).Store((*[16]uint32)(d[32:]))
	ahi.ConcatPermute(bhi, words32Idx[3]).Store((*[16]uint32)(d[48:]))
}

// words32Idx: the interleave of two rows (low and high eight lanes), then the merge of two
// interleaved rows into groups of four words (groups 0-3 and 4-7 of the eight).
// Set by initSearch16Vectors (see initAVX512Vectors).
var words32Idx [4]archsimd.Uint32x16

func initSearch16Vectors() {
	// The indices first (scalar code), then the vectors, then VZEROUPPER.
	var v [4][16]uint32
	var lo, hi [4][16]uint32
	for p := range 16 {
		v[0][p] = uint32(p/2 + 16*(p%2))
		v[1][p] = uint32(8 + p/2 + 16*(p%2))
		l, i := p/4, p%4
		v[2][p] = uint32(2*l + i%2 + 16*(i/2))
		v[3][p] = v[2][p] + 8
	}
	for st, b := range [4]int{8, 4, 2, 1} {
		for p := range 16 {
			if p&b == 0 {
				lo[st][p], hi[st][p] = uint32(p), uint32(p+b)
			} else {
				lo[st][p], hi[st][p] = uint32(16+p-b), uint32(16+p)
			}
		}
	}
	for i := range words32Idx {
		words32Idx[i] = archsimd.LoadUint32x16(&v[i])
	}
	for st := range transposeIdx {
		transposeIdx[st][0], transposeIdx[st][1] = archsimd.LoadUint32x16(&lo[st]), archsimd.LoadUint32x16(&hi[st])
	}
	archsimd.ClearAVXUpperBits()
}

// batchStats holds pack's statistics of sixteen groups.
type batchStats struct {
	sumSq, err [batchGroups]float32
	clip       [batchGroups]int32
}

// packBatch is pack for the sixteen transposed groups of t with the scales of res: the packed
// words go to w (word i of group l at w[16i+l]), the levels to q (transposed like t), then the
// error and Σx² are summed from t and q. Where the search knows the error of the scale and
// levels it chose (res.errSet), that is pack's error, bit for bit: the same terms in the same
// order; it is taken, with the search's Σx² (res.asm.ss), and the levels are not stored.
func packBatch(st *batchStats, t, q []float32, w []uint32, g int, res *batchResult) {
	s := archsimd.LoadFloat32x16(&res.best)
	inv := bc16(1).Div(s)
	div := archsimd.Mask32x16FromBits(res.div)
	hi, lo := bc16(7.5), bc16(-8.5)
	eight, fifteen := archsimd.BroadcastUint32x16(8), archsimd.BroadcastUint32x16(15)
	one := archsimd.BroadcastInt32x16(1)
	var clip archsimd.Int32x16
	for j := 0; j < g; j += 8 {
		var word archsimd.Uint32x16
		for jj := range 8 {
			v := ld16(t, j+jj)
			f := v.Mul(inv)
			if res.div != 0 {
				f = v.Div(s).Merge(f, div)
			}
			clip = clip.Add(one.Masked(f.GreaterEqual(hi).Or(f.Less(lo))))
			r := f.Max(bc16(-8)).Min(bc16(7)).Add(bc16(rne))
			if !res.errSet {
				r.Sub(bc16(rne)).Store((*[16]float32)(q[batchGroups*(j+jj):]))
			}
			// (a per-lane shift: ShiftAllLeft by a variable takes its count through a legacy MOVQ)
			word = word.Or(r.AsUint32x16().Add(eight).And(fifteen).ShiftLeft(archsimd.BroadcastUint32x16(uint32(4 * jj))))
		}
		word.Store((*[16]uint32)(w[batchGroups*(j/8):]))
	}
	clip.Store(&st.clip)
	if res.errSet {
		archsimd.LoadFloat32x16(&res.err).Store(&st.err)
	} else {
		e := errQ16(t, q, g, 0, s).Add(errQ16(t, q, g, 4, s))
		e.Store(&st.err)
	}
	if res.errSet {
		archsimd.LoadFloat32x16(&res.asm.ss).Store(&st.sumSq)
	} else {
		ss := sumSq16(t, g, 0).Add(sumSq16(t, g, 4))
		ss.Store(&st.sumSq)
	}
}

// errQ16 returns (a_o+a_(o+1))+(a_(o+2)+a_(o+3)) of the spec's error accumulators of levels q
// and scales s, o = off.
func errQ16(t, q []float32, g, off int, s archsimd.Float32x16) archsimd.Float32x16 {
	var e0, e1, e2, e3 archsimd.Float32x16
	for j := off; j < g; j += 8 {
		v0, v1, v2, v3 := rows4(t, j)
		q0, q1, q2, q3 := rows4(q, j)
		e0 = e0.Add(sq16(v0, q0, s))
		e1 = e1.Add(sq16(v1, q1, s))
		e2 = e2.Add(sq16(v2, q2, s))
		e3 = e3.Add(sq16(v3, q3, s))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// sumSq16 is errQ16 for Σx².
func sumSq16(t []float32, g, off int) archsimd.Float32x16 {
	var e0, e1, e2, e3 archsimd.Float32x16
	for j := off; j < g; j += 8 {
		v0, v1, v2, v3 := rows4(t, j)
		e0 = e0.Add(v0.Mul(v0))
		e1 = e1.Add(v1.Mul(v1))
		e2 = e2.Add(v2.Mul(v2))
		e3 = e3.Add(v3.Mul(v3))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// transpose16 writes element j of group l of xs (sixteen groups of g) to t[16j+l]: sixteen by
// sixteen blocks in the four butterfly stages of two-source permutes (block sizes 8, 4, 2, 1),
// or one element at a time when g is not a multiple of 16. Stages 8 and 4 mix only rows of
// equal index mod 4, stages 2 and 1 only rows of one aligned four, so each half works on four
// rows at a time, through a stack block, and keeps them in registers.
func transpose16(t, xs []float32, g int) {
	if g%16 != 0 {
		for l := range batchGroups {
			for j, v := range xs[l*g : (l+1)*g] {
				t[batchGroups*j+l] = v
			}
		}
		return
	}
	var mid [16 * 16]float32
	transpose16Blocks(t, xs, g, &mid)
	archsimd.ClearAVXUpperBits()
}

// transpose16Blocks is transpose16 for g a multiple of 16, through the scratch block mid (the
// FP4 batches give one on a 64-byte boundary); it leaves the upper register state to its caller.
func transpose16Blocks(t, xs []float32, g int, mid *[16 * 16]float32) {
	i8, h8, i4, h4 := transposeIdx[0][0], transposeIdx[0][1], transposeIdx[1][0], transposeIdx[1][1]
	i2, h2, i1, h1 := transposeIdx[2][0], transposeIdx[2][1], transposeIdx[3][0], transposeIdx[3][1]
	row := func(l, c int) archsimd.Float32x16 { return archsimd.LoadFloat32x16((*[16]float32)(xs[l*g+c:])) }
	for c := 0; c < g; c += 16 {
		for m := range 4 {
			a, b, cc, d := butterfly4(row(m, c), row(m+4, c), row(m+8, c), row(m+12, c), i8, h8, i4, h4)
			a.Store((*[16]float32)(mid[16*m:]))
			b.Store((*[16]float32)(mid[16*(m+4):]))
			cc.Store((*[16]float32)(mid[16*(m+8):]))
			d.Store((*[16]float32)(mid[16*(m+12):]))
		}
		for m := 0; m < 16; m += 4 {
			a, b, cc, d := butterfly4(ld16(mid[:], m), ld16(mid[:], m+1), ld16(mid[:], m+2), ld16(mid[:], m+3), i2, h2, i1, h1)
			a.Store((*[16]float32)(t[batchGroups*(c+m):]))
			b.Store((*[16]float32)(t[batchGroups*(c+m+1):]))
			cc.Store((*[16]float32)(t[batchGroups*(c+m+2):]))
			d.Store((*[16]float32)(t[batchGroups*(c+m+3):]))
		}
	}
}

// butterfly4 runs two butterfly stages on rows a, b, c, d: the pairs (a, c) and (b, d) with
// the permutes lo1, hi1, then (a, b) and (c, d) with lo2, hi2.
func butterfly4(a, b, c, d archsimd.Float32x16, lo1, hi1, lo2, hi2 archsimd.Uint32x16) (archsimd.Float32x16, archsimd.Float32x16, archsimd.Float32x16, archsimd.Float32x16) {
	a, c = a.ConcatPermute(c, lo1), a.ConcatPermute(c, hi1)
	b, d = b.ConcatPermute(d, lo1), b.ConcatPermute(d, hi1)
	a, b = a.ConcatPermute(b, lo2), a.ConcatPermute(b, hi2)
	c, d = c.ConcatPermute(d, lo2), c.ConcatPermute(d, hi2)
	return a, b, c, d
}

// transposeIdx holds, for the stages with block size b = 8, 4, 2, 1, the permutes of rows i
// and i+b (bit b of i clear): the new row i takes the first b of each 2b lanes of row i, then
// the first b of row i+b; the new row i+b takes the second b of each (initSearch16Vectors).
var transposeIdx [4][2]archsimd.Uint32x16

// batchResult is the outcome of search for sixteen groups: bit l of ok is set when group l was
// searched here (finite, non-zero and not tiny RTN scale), bit l of div when its levels are
// the RTN ones.
type batchResult struct {
	best, rtnErr [batchGroups]float32
	ok, div      uint16
	// err is the unweighted error of best with its levels in every lane of ok, when errSet.
	err    [batchGroups]float32
	errSet bool
	asm    searchState // the assembly loops' state, in the caller's frame (no zeroing here)
}

func ld16(t []float32, j int) archsimd.Float32x16 {
	return archsimd.LoadFloat32x16Slice(t[batchGroups*j : batchGroups*j+batchGroups])
}

// rows4 returns rows j..j+3 of a transposed block.
func rows4(t []float32, j int) (v0, v1, v2, v3 archsimd.Float32x16) {
	b := (*[4 * batchGroups]float32)(t[batchGroups*j:])
	return archsimd.LoadFloat32x16((*[16]float32)(b[0:])), archsimd.LoadFloat32x16((*[16]float32)(b[16:])),
		archsimd.LoadFloat32x16((*[16]float32)(b[32:])), archsimd.LoadFloat32x16((*[16]float32)(b[48:]))
}

// sq16 returns (v - q·s)².
func sq16(v, q, s archsimd.Float32x16) archsimd.Float32x16 {
	d := v.Sub(q.Mul(s))
	return d.Mul(d)
}

// errSums16 is errSumsMul of each lane (errSumsDiv in the lanes of divLanes): errSumsAsm
// through st.
func errSums16(t []float32, g int, s archsimd.Float32x16, divLanes uint16, st *searchState) (e, xq, qq archsimd.Float32x16) {
	s.Store(&st.s)
	errSumsAsm(&t[0], g, uint32(divLanes), st)
	return archsimd.LoadFloat32x16(&st.e), archsimd.LoadFloat32x16(&st.xq), archsimd.LoadFloat32x16(&st.qq)
}

// searchBatch runs quantGroup's checks and, for SearchMSE, search (unsigned scales) on the
// sixteen transposed groups of t.
func searchBatch(res *batchResult, t []float32, g int, p *Int4Params) {
	a, sR, scaled, ok := batchRTN(t, g)
	res.errSet = false
	if p.Search != SearchMSE {
		res.ok = scaled
		sR.Store(&res.best)
		res.div = res.ok
		return
	}
	res.ok = ok
	if ok == 0 {
		return
	}
	st := &res.asm
	sR.Store(&st.sR)
	rtnErrAsm(&t[0], g, st) // errDiv16, and Σx² for packBatch
	bestE := archsimd.LoadFloat32x16(&st.e)
	bestE.StoreSlice(res.rtnErr[:])
	best := sR
	var mul uint16 // lanes whose best is a searched scale (levels x·(1/s))
	// The candidates of p.Pos in the assembly loop (search_amd64.s); g is a multiple of 8
	// (checkInt4Shapes).
	if len(p.Pos) > 0 {
		a.Store(&st.a)
		bestE.Store(&st.bestE)
		best.Store(&st.best)
		searchPosAsm(&t[0], g, &p.Pos[0], len(p.Pos), uint32(ok), st)
		bestE, best = archsimd.LoadFloat32x16(&st.bestE), archsimd.LoadFloat32x16(&st.best)
		mul = uint16(st.mul)
	}
	if p.Refine > 0 {
		_, sxq, sqq := errSums16(t, g, best, ok&^mul, st)
		best, bestE, mul = refine16(p.Refine, ok, mul, best, bestE, sxq, sqq, func(s archsimd.Float32x16) (e, xq, qq archsimd.Float32x16) {
			return errSums16(t, g, s, 0, st)
		})
	}
	bestE.Store(&res.err)
	res.errSet = true
	best.StoreSlice(res.best[:])
	res.div = ok &^ mul
}

// batchRTN returns the absolute maximum a and the RTN scale sR of the sixteen transposed
// groups of t, the lanes whose values are finite with a non-zero sR (quantGroup's RTN groups)
// and of those the lanes that SearchMSE searches (a ≥ TinyAbsMax).
func batchRTN(t []float32, g int) (a, sR archsimd.Float32x16, scaled, searched uint16) {
	m := archsimd.BroadcastUint32x16(0)
	abs := archsimd.BroadcastUint32x16(0x7fffffff)
	for j := range g {
		m = m.Max(ld16(t, j).AsUint32x16().And(abs))
	}
	finite := m.AsInt32x16().Less(archsimd.BroadcastInt32x16(0x7f800000))
	a = m.AsFloat32x16()
	sR = roundBF16x16(a.Div(bc16(7.5)))
	rtn := finite.And(sR.NotEqual(archsimd.Float32x16{}))
	return a, sR, rtn.ToBits(), rtn.And(a.GreaterEqual(bc16(TinyAbsMax))).ToBits()
}

// refine16 is the least-squares refinement of search (and searchWeighted, with sums its
// weighted sums) in the lanes of ok: up to n times s ← bf16(Σx·q/Σq²), from the sums sxq and
// sqq of the best scale, taken where its error is strictly below bestE; a lane stops where the
// scalar loop breaks. It returns the best scales, their errors and mul with the lanes that took
// one set.
func refine16(n int, ok, mul uint16, best, bestE, sxq, sqq archsimd.Float32x16, sums func(s archsimd.Float32x16) (e, xq, qq archsimd.Float32x16)) (archsimd.Float32x16, archsimd.Float32x16, uint16) {
	zero := archsimd.Float32x16{}
	act := ok
	for range n {
		act &= sqq.NotEqual(zero).ToBits()
		if act == 0 {
			break
		}
		s := roundBF16x16(sxq.Div(sqq))
		act &^= s.Equal(best).Or(s.LessEqual(zero)).ToBits()
		if act == 0 {
			break
		}
		e, sxq2, sqq2 := sums(s)
		act &= e.Less(bestE).ToBits()
		w := archsimd.Mask32x16FromBits(act)
		bestE, best = e.Merge(bestE, w), s.Merge(best, w)
		sxq, sqq = sxq2.Merge(sxq, w), sqq2.Merge(sqq, w)
		mul |= act
	}
	return best, bestE, mul
}
