//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// The FP4 quantizers sixteen groups at once, as the INT4 search does (search16_avx512.go): the
// sixteen groups of a batch are transposed into a scratch block (row j holds element j of each
// group), so lane l of every vector is group k0+l and each step of the group's work (its
// absolute maximum, its RTN scale code, every candidate's error, the choice, the codes and the
// statistics) runs on sixteen groups with no horizontal step. The specification's eight sum
// lanes of a group are eight accumulators (row j goes to accumulator j%8, rows added in element
// order), combined as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), so each lane computes the scalar sums
// bit for bit. The candidates are the scalar ones in the scalar order; a candidate replaces the
// best where its error is strictly smaller, so every lane chooses the code fp4Group chooses.
//
// The ratio x/s is taken as |x|·(1/s). For MXFP4 the scale is a power of two, so 1/s is exact
// and the product is the IEEE quotient. For NVFP4 the product is within a few units in the last
// place of the quotient, and only the quotient's BF16 rounding is used: the two round alike
// unless one lies near a BF16 rounding midpoint (low sixteen bits 0x8000), so in the candidates'
// errors a row with a product within 32 units of a midpoint is redone with the division. The
// codes and statistics of the chosen NVFP4 scales take the division itself: one pass, where
// on the Intel CPU of docs/FP4.md it cost less than the product and its check (BenchmarkFP4Parts,
// alternating builds), and eight candidate passes, where it cost more. A batch with a
// non-finite value is left to the per-group loop, which reports it.
//
// These are the Go forms. By default the transpose, the candidates' errors, the final pass
// and the statistics run as assembly (fp4*_amd64.s, fp4_amd64.go), which takes the checked
// product in the final pass too; fp4NoAsm keeps the Go forms, which the tests compare.

// fp4K holds the constant vectors of the batched FP4 loops (initFP4Batch, on a CPU with
// AVX-512: an initialiser would run AVX-512 instructions on every CPU).
var fp4K struct {
	abs, one, bfHalf, bfKeep, small, rHalf, keep22, six, maxFinite archsimd.Uint32x16
	nearAdd, nearMask, eps, e4Round, e4Rebase, e4Big, e4MinNormal  archsimd.Uint32x16
	codeTable, eight                                               archsimd.Uint32x16
	magic, rne, f512, p120, fsix, tiny                             archsimd.Float32x16
}

func initFP4Batch() {
	u := archsimd.BroadcastUint32x16
	f := archsimd.BroadcastFloat32x16
	k := &fp4K
	k.abs, k.one, k.bfHalf, k.bfKeep = u(0x7fffffff), u(1), u(0x7fff), u(0xffff0000)
	k.small, k.rHalf, k.keep22, k.six, k.maxFinite = u(0x3f800000), u(0x1fffff), u(0xffc00000), u(0x40c00000), u(0x7f7fffff)
	k.nearAdd, k.nearMask, k.eps = u(0x8020), u(0xffc0), u(nvfp4EpsCode)
	k.e4Round, k.e4Rebase, k.e4Big, k.e4MinNormal = u(0x7ffff), u(120<<3), u(0x43e00000), u(0x3c800000)
	k.codeTable, k.eight = archsimd.LoadUint32x16(&fp4CodeTable), u(8)
	k.magic, k.rne, k.f512, k.p120, k.fsix, k.tiny = f(0x1p22), f(rne), f(512), f(0x1p120), f(6), f(TinyAbsMax)
	archsimd.ClearAVXUpperBits()
}

// fp4Batch holds the results of sixteen groups besides their codes and scale codes.
type fp4Batch struct {
	err, rtn, ss [batchGroups]float32
	clip         [batchGroups]int32
	words        [4 * batchGroups]uint32 // MXFP4: word i of group l at 16i+l (storeWords32)
}

// fp4BatchesAVX512 quantizes the groups of src in whole batches of sixteen, from group 0 on,
// and returns how many it did; it stops before a batch holding a non-finite value. The caller
// does the rest one group at a time. g is the NVFP4 global scale.
func fp4BatchesAVX512(out FP4Out, src []float32, ng, gs int, g float32, search Search) int {
	// The transposed block and the transpose's scratch on 64-byte boundaries: a vector load or
	// store across two cache lines costs two (a third of the time of a batch went to them).
	var buf [batchGroups*MXFP4GroupSize + 16*16 + 16]float32
	var res fp4Batch
	var amax [16]uint32
	a := int(uintptr(unsafe.Pointer(&buf[0]))%64) / 4
	tr := buf[(16-a)%16:][:batchGroups*gs]
	mid := (*[16 * 16]float32)(buf[(16-a)%16+batchGroups*MXFP4GroupSize:])
	gb := *(*uint32)(unsafe.Pointer(&g))
	mse := search == SearchMSE
	k0 := 0
	for ; k0+batchGroups <= ng; k0 += batchGroups {
		xs := src[k0*gs : (k0+batchGroups)*gs]
		var m archsimd.Uint32x16
		if fp4NoAsm {
			transpose16Blocks(tr, xs, gs, mid)
			m = rowsAbsMax(tr, gs)
		} else {
			fp4TransposeAVX512(&tr[0], &xs[0], gs/16, gs, &amax)
			m = archsimd.LoadUint32x16(&amax)
		}
		var ok bool
		if gs == NVFP4GroupSize {
			w := (*[32]uint32)(unsafe.Pointer(&out.Packed[k0*8]))
			ok = nvfp4Batch16(&res, (*[16 * 16]float32)(tr), m, w, (*[16]uint8)(out.Scales[k0:]), gb, mse)
		} else {
			w := unsafe.Slice((*uint32)(unsafe.Pointer(&out.Packed[k0*16])), 64)
			ok = mxfp4Batch16(&res, (*[16 * 32]float32)(tr), m, w, (*[16]uint8)(out.Scales[k0:]), mse)
		}
		archsimd.ClearAVXUpperBits()
		if !ok {
			break
		}
		st := out.Stats[k0 : k0+batchGroups]
		if !fp4NoAsm {
			fp4StatsAVX512(&res, (*[batchGroups]GroupStats)(st))
			continue
		}
		for l := range st {
			st[l] = GroupStats{SumSq: res.ss[l], Err: res.err[l], RTNErr: res.rtn[l], Clipped: res.clip[l]}
		}
	}
	archsimd.ClearAVXUpperBits()
	return k0
}

// rowsAbsMax returns the largest |x| bit pattern of each lane over the n rows of t.
func rowsAbsMax(t []float32, n int) archsimd.Uint32x16 {
	abs := fp4K.abs
	var m archsimd.Uint32x16
	for j := range n {
		m = m.Max(archsimd.LoadFloat32x16((*[16]float32)(t[16*j:])).AsUint32x16().And(abs))
	}
	return m
}

// nvfp4Batch16 quantizes sixteen transposed NVFP4 groups (global scale bits gb): codes to w
// (two words per group, in output order), scale codes to sc, the rest to r. It returns false,
// having written nothing, when a value is not finite.
func nvfp4Batch16(r *fp4Batch, t *[256]float32, m archsimd.Uint32x16, w *[32]uint32, sc *[16]uint8, gb uint32, mse bool) bool {
	k := &fp4K
	if m.Greater(k.maxFinite).ToBits() != 0 {
		return false
	}
	a := m.AsFloat32x16()
	gv := archsimd.BroadcastUint32x16(gb).AsFloat32x16()
	// nvfp4RTNCode: e4m3(g·bf16(a/6)), zero replaced by the eps code.
	c0 := e4m3x16(roundBF16x16(a.Div(k.fsix)).Mul(gv))
	c0 = k.eps.Merge(c0, c0.Equal(archsimd.Uint32x16{}))
	s0 := nvfp4ScaleX16(c0, gv)
	best, bestS := c0, s0
	var e0 archsimd.Float32x16
	if mse {
		srch := a.GreaterEqual(k.tiny)
		if srch.ToBits() != 0 {
			e0 = fp4ErrRows(t[:], 16, s0, false)
			bestE := e0
			for i := range len(nvfp4Offsets) { // (a range over the array would copy it with MOVUPS)
				v := c0.Add(archsimd.BroadcastUint32x16(uint32(nvfp4Offsets[i])))
				// Codes 1..0x7e only: v-1 below 0x7e, unsigned (v = 0 wraps).
				valid := v.Sub(k.one).Less(archsimd.BroadcastUint32x16(0x7e)).And(srch)
				if valid.ToBits() == 0 {
					continue
				}
				s := nvfp4ScaleX16(v, gv).Merge(s0, valid)
				e := fp4ErrRows(t[:], 16, s, false)
				better := valid.And(e.Less(bestE))
				bestE, best, bestS = e.Merge(bestE, better), v.Merge(best, better), s.Merge(bestS, better)
			}
		}
	}
	var wa, wb archsimd.Uint32x16
	if fp4NoAsm {
		wa, wb, _, _ = fp4PackRows(r, t[:], 16, bestS, false)
	} else {
		var sv, inv [16]float32
		bestS.Store(&sv)
		archsimd.BroadcastFloat32x16(1).Div(bestS).Store(&inv)
		fp4PackNVAVX512(t, &sv, &inv, r)
		wa = archsimd.LoadUint32x16((*[16]uint32)(r.words[:16]))
		wb = archsimd.LoadUint32x16((*[16]uint32)(r.words[16:32]))
	}
	if !mse {
		e0 = archsimd.LoadFloat32x16(&r.err)
	} else {
		// Groups not searched keep RTN: their RTN error is their error.
		e0 = e0.Merge(archsimd.LoadFloat32x16(&r.err), a.GreaterEqual(k.tiny))
	}
	e0.Store(&r.rtn)
	wa.ConcatPermute(wb, words32Idx[0]).Store((*[16]uint32)(w[:16]))
	wa.ConcatPermute(wb, words32Idx[1]).Store((*[16]uint32)(w[16:]))
	best.TruncateToUint8().Store(sc)
	return true
}

// mxfp4Batch16 is nvfp4Batch16 for sixteen transposed MXFP4 groups (four words each).
func mxfp4Batch16(r *fp4Batch, t *[512]float32, m archsimd.Uint32x16, w []uint32, sc *[16]uint8, mse bool) bool {
	k := &fp4K
	if m.Greater(k.maxFinite).ToBits() != 0 {
		return false
	}
	a := m.AsFloat32x16()
	// mxfp4RTNCode: the exponent of a rounded up from 1.75, minus 2, clamped at 0.
	c0 := sra16(m.Add(archsimd.BroadcastUint32x16(0x200000)), 23).AsInt32x16().Sub(archsimd.BroadcastInt32x16(2)).Max(archsimd.Int32x16{}).AsUint32x16()
	s0 := mxfp4ScaleX16(c0)
	best, bestS := c0, s0
	var e0 archsimd.Float32x16
	if mse {
		// The one offset, -1: codes from 0 on.
		valid := a.GreaterEqual(k.tiny).And(c0.NotEqual(archsimd.Uint32x16{}))
		if valid.ToBits() != 0 {
			e0 = fp4ErrRows(t[:], 32, s0, true)
			v := c0.Sub(k.one)
			s := mxfp4ScaleX16(v).Merge(s0, valid)
			e := fp4ErrRows(t[:], 32, s, true)
			better := valid.And(e.Less(e0))
			best, bestS = v.Merge(best, better), s.Merge(bestS, better)
		}
	}
	if fp4NoAsm {
		w0, w1, w2, w3 := fp4PackRows(r, t[:], 32, bestS, true)
		w0.Store((*[16]uint32)(r.words[0:]))
		w1.Store((*[16]uint32)(r.words[16:]))
		w2.Store((*[16]uint32)(r.words[32:]))
		w3.Store((*[16]uint32)(r.words[48:]))
	} else {
		var sv, inv [16]float32
		bestS.Store(&sv)
		archsimd.BroadcastFloat32x16(1).Div(bestS).Store(&inv)
		fp4PackMXAVX512(t, &sv, &inv, r)
	}
	e := archsimd.LoadFloat32x16(&r.err)
	if mse {
		e = e0.Merge(e, a.GreaterEqual(k.tiny).And(c0.NotEqual(archsimd.Uint32x16{})))
	}
	e.Store(&r.rtn)
	storeWords32(w, r.words[:])
	best.TruncateToUint8().Store(sc)
	return true
}

// e4m3x16 is e4m3 of sixteen non-negative values (+Inf included).
func e4m3x16(v archsimd.Float32x16) archsimd.Uint32x16 {
	k := &fp4K
	b := v.AsUint32x16()
	code := sra16(b.Add(k.e4Round).Add(sra16(b, 20).And(k.one)), 20).Sub(k.e4Rebase)
	sub := v.Mul(k.f512).Add(k.rne).AsUint32x16().Sub(k.rne.AsUint32x16())
	code = sub.Merge(code, b.Less(k.e4MinNormal))
	return archsimd.BroadcastUint32x16(0x7e).Merge(code, b.GreaterEqual(k.e4Big))
}

// nvfp4ScaleX16 is NVFP4Scale of sixteen codes 0..0x7e: the e4m3 value (the code's bits moved
// to a float32's exponent and significand, times 2^120, exact) divided by g.
func nvfp4ScaleX16(c archsimd.Uint32x16, g archsimd.Float32x16) archsimd.Float32x16 {
	return c.ShiftAllLeft(20).AsFloat32x16().Mul(fp4K.p120).Div(g)
}

// mxfp4ScaleX16 is MXFP4Scale of sixteen codes 0..254.
func mxfp4ScaleX16(c archsimd.Uint32x16) archsimd.Float32x16 {
	z := c.Equal(archsimd.Uint32x16{})
	return archsimd.BroadcastUint32x16(0x00400000).Merge(c.ShiftAllLeft(23), z).AsFloat32x16()
}

// fp4Ratio returns |x|/s's bits for one row: |x|·inv, redone with the division where the
// product lies near a BF16 rounding midpoint (unless exact: a power-of-two scale).
func fp4Ratio(ax, s, inv archsimd.Float32x16, exact bool) archsimd.Uint32x16 {
	k := &fp4K
	p := ax.Mul(inv).AsUint32x16()
	if !exact && p.Add(k.nearAdd).And(k.nearMask).Equal(archsimd.Uint32x16{}).ToBits() != 0 {
		p = ax.Div(s).AsUint32x16()
	}
	return p
}

// fp4Mag returns, for the non-negative ratio bits p, the BF16-rounded ratio a and the E2M1
// value v of a (bits): below 1 a rounded to a multiple of 1/2 by adding and subtracting 2^22,
// from 1 on a rounded to one significand bit, nearest even, and saturated at 6.
func fp4Mag(p archsimd.Uint32x16) (a, v archsimd.Uint32x16) {
	k := &fp4K
	a = p.Add(k.bfHalf).Add(sra16(p, 16).And(k.one)).And(k.bfKeep)
	vs := a.AsFloat32x16().Add(k.magic).Sub(k.magic).AsUint32x16()
	vl := a.Add(k.rHalf).Add(sra16(a, 22).And(k.one)).And(k.keep22).Min(k.six)
	return a, vs.Merge(vl, a.Less(k.small))
}

// fp4ErrRows returns each lane's Σ(x - f32(value·s))² over the n rows of t (16 or 32), in the
// specification's order: accumulator j adds rows j, j+8, ..., and the accumulators combine as
// ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)). The sign does not change a squared error: the
// difference is taken between |x| and the magnitude's value.
func fp4ErrRows(t []float32, n int, s archsimd.Float32x16, exact bool) archsimd.Float32x16 {
	if !fp4NoAsm {
		return fp4ErrAsm16(t, n, s)
	}
	inv := archsimd.BroadcastFloat32x16(1).Div(s)
	return fp4ErrHalf(t, n, 0, s, inv, exact).Add(fp4ErrHalf(t, n, 4, s, inv, exact))
}

// fp4ErrHalf returns (a_o+a_(o+1))+(a_(o+2)+a_(o+3)) of fp4ErrRows's accumulators, o = off.
func fp4ErrHalf(t []float32, n, off int, s, inv archsimd.Float32x16, exact bool) archsimd.Float32x16 {
	abs := fp4K.abs
	term := func(j int) archsimd.Float32x16 {
		ax := archsimd.LoadFloat32x16((*[16]float32)(t[16*j:])).AsUint32x16().And(abs).AsFloat32x16()
		_, v := fp4Mag(fp4Ratio(ax, s, inv, exact))
		d := ax.Sub(v.AsFloat32x16().Mul(s))
		return d.Mul(d)
	}
	var e0, e1, e2, e3 archsimd.Float32x16
	for j := off; j < n; j += 8 {
		e0 = e0.Add(term(j))
		e1 = e1.Add(term(j + 1))
		e2 = e2.Add(term(j + 2))
		e3 = e3.Add(term(j + 3))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// fp4PackRows writes the error, Σx² and clip counts of the n rows of sixteen transposed groups
// (16 or 32) quantized with the scales s into r, and returns their codes: word i holds elements
// 8i..8i+7 of each group (w2 and w3 zero for 16 rows).
func fp4PackRows(r *fp4Batch, t []float32, n int, s archsimd.Float32x16, exact bool) (w0, w1, w2, w3 archsimd.Uint32x16) {
	inv := archsimd.BroadcastFloat32x16(1).Div(s)
	var clip archsimd.Int32x16
	eLo, l0, l1, l2, l3 := fp4PackHalf(t, n, 0, s, inv, exact, &clip)
	eHi, h0, h1, h2, h3 := fp4PackHalf(t, n, 4, s, inv, exact, &clip)
	eLo.Add(eHi).Store(&r.err)
	clip.Store((*[16]int32)(&r.clip))
	sumSq16(t, n, 0).Add(sumSq16(t, n, 4)).Store(&r.ss)
	return l0.Or(h0.ShiftAllLeft(16)), l1.Or(h1.ShiftAllLeft(16)), l2.Or(h2.ShiftAllLeft(16)), l3.Or(h3.ShiftAllLeft(16))
}

// fp4PackHalf is fp4ErrHalf that also counts the clipped elements into clip and returns, for
// each block of eight rows, the codes of its rows off..off+3 in the low sixteen bits of p_i.
func fp4PackHalf(t []float32, n, off int, s, inv archsimd.Float32x16, exact bool, clip *archsimd.Int32x16) (_ archsimd.Float32x16, p0, p1, p2, p3 archsimd.Uint32x16) {
	k := &fp4K
	c := *clip
	// The accumulators of rows off+3, off+2, off+1, off, rotated after each row: the rows of a
	// block go in reverse, so that each code shifts in by a constant four bits (a shift by a
	// variable count would take a legacy-SSE MOVQ), and each accumulator still adds its rows
	// in element order. The loop body is not a call: Go would spill every live vector around it.
	q0, q1, q2, q3 := archsimd.Float32x16{}, archsimd.Float32x16{}, archsimd.Float32x16{}, archsimd.Float32x16{}
	for j := off; j < n; j += 8 {
		var p archsimd.Uint32x16
		for i := 3; i >= 0; i-- {
			x := archsimd.LoadFloat32x16((*[16]float32)(t[16*(j+i):])).AsUint32x16()
			ax := x.And(k.abs).AsFloat32x16()
			var r archsimd.Uint32x16 // the ratio: see the file's comment
			if exact {
				r = ax.Mul(inv).AsUint32x16()
			} else {
				r = ax.Div(s).AsUint32x16()
			}
			a, v := fp4Mag(r)
			d := ax.Sub(v.AsFloat32x16().Mul(s))
			c = c.Sub(a.Greater(k.six).ToInt32x16())
			p = p.ShiftAllLeft(4).Or(fp4Code(v, x))
			q0, q1, q2, q3 = q1, q2, q3, q0.Add(d.Mul(d))
		}
		switch j / 8 {
		case 0:
			p0 = p
		case 1:
			p1 = p
		case 2:
			p2 = p
		default:
			p3 = p
		}
	}
	*clip = c
	// q3, q2, q1, q0 now hold the accumulators of rows off+3 .. off.
	return q3.Add(q2).Add(q1.Add(q0)), p0, p1, p2, p3
}

// fp4Code returns the E2M1 codes of the magnitudes v (bits) with the signs of x. The key
// (v>>22) + (v>>30) is 0, 0xc, 0xe, 0xf, 1, 2, 3, 4 for 0, 1/2, 1, 3/2, 2, 3, 4, 6: its low four
// bits index a table of the magnitude indices; bit 3 is x's sign.
func fp4Code(v, x archsimd.Uint32x16) archsimd.Uint32x16 {
	k := &fp4K
	idx := k.codeTable.Permute(sra16(v, 22).Add(sra16(v, 30)))
	return idx.Or(x.RotateAllLeft(4).And(k.eight))
}

// fp4CodeTable maps fp4Code's key to the E2M1 magnitude index.
var fp4CodeTable = [16]uint32{0: 0, 1: 4, 2: 5, 3: 6, 4: 7, 0xc: 1, 0xe: 2, 0xf: 3}
