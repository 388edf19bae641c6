//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"
)

// The batched FP4 quantizers of fp4batch_avx512.go in 256-bit vectors, eight groups at once,
// for CPUs with AVX2 and without AVX-512 (or with the loops forced to "avx2"): the groups
// transposed by transpose8, lane l of every Float32x8 group k0+l, the same steps in the same
// order. AVX2 has no unsigned compares, mask registers, rotates or truncations: the magnitudes
// and codes compared are below 2^31 and compared signed, masks are vectors, the sign bit goes
// to the code by an arithmetic shift, the packed words are put in order by interleaves, and the
// scale codes and statistics are stored through a scratch block and copied out by scalar code.
// The transpose, the candidates' errors, the final pass and the statistics' store run as
// assembly (fp4*_amd64.s; the ratios by division) unless fp4NoAsm keeps these Go forms.

// fp4K8 holds the constant vectors of the AVX2 batch (initFP4Batch8, on a CPU with AVX2).
var fp4K8 struct {
	abs, one, bfHalf, bfKeep, rHalf, keep22, six, eight, half3f, fc archsimd.Uint32x8
	small, maxFinite, sixI, nearAdd, nearMask                       archsimd.Uint32x8
	e4Round, e4Rebase, e4Big, e4MinNormal, eps, code7e              archsimd.Uint32x8
	magic, rne, f512, p120, fsix, tiny                              archsimd.Float32x8
}

var _ = func() bool {
	if archsimd.X86.AVX2() {
		initFP4Batch8()
	}
	return true
}()

func initFP4Batch8() {
	u := archsimd.BroadcastUint32x8
	f := archsimd.BroadcastFloat32x8
	k := &fp4K8
	k.abs, k.one, k.bfHalf, k.bfKeep = u(0x7fffffff), u(1), u(0x7fff), u(0xffff0000)
	k.rHalf, k.keep22, k.six, k.eight, k.half3f, k.fc = u(0x1fffff), u(0xffc00000), u(0x40c00000), u(8), u(0x3f000000), u(0xfc)
	k.small, k.maxFinite, k.sixI, k.nearAdd, k.nearMask = u(0x3f800000), u(0x7f7fffff), u(0x40c00000), u(0x8020), u(0xffc0)
	k.e4Round, k.e4Rebase, k.e4Big, k.e4MinNormal, k.eps, k.code7e = u(0x7ffff), u(120<<3), u(0x43e00000), u(0x3c800000), u(nvfp4EpsCode), u(0x7e)
	k.magic, k.rne, k.f512, k.p120, k.fsix, k.tiny = f(0x1p22), f(rne), f(512), f(0x1p120), f(6), f(TinyAbsMax)
	archsimd.ClearAVXUpperBits()
}

// fp4Batch8 holds the results of eight groups: the fp4Batch statistics (first eight lanes) and
// the scale codes.
type fp4Batch8 struct {
	fp4Batch
	codes [avx2Groups]uint32
}

// fp4BatchesAVX2 is fp4BatchesAVX512 eight groups at a time.
func fp4BatchesAVX2(out FP4Out, src []float32, ng, gs int, g float32, search Search) int {
	var t [avx2Groups*MXFP4GroupSize + 16]float32
	var res fp4Batch8
	var amax [8]uint32
	a := int(uintptr(unsafe.Pointer(&t[0]))%64) / 4 // the block on a 64-byte boundary
	tr := t[(16-a)%16:][:avx2Groups*gs]
	gb := *(*uint32)(unsafe.Pointer(&g))
	mse := search == SearchMSE
	k0 := 0
	for ; k0+avx2Groups <= ng; k0 += avx2Groups {
		xs := src[k0*gs : (k0+avx2Groups)*gs]
		var m archsimd.Uint32x8
		if fp4NoAsm {
			transpose8(tr, xs, gs)
			m = rowsAbsMax8(tr, gs)
		} else {
			fp4TransposeAVX2(&tr[0], &xs[0], gs/8, gs, &amax)
			m = archsimd.LoadUint32x8(&amax)
		}
		ok := fp4Batch8Groups(&res, out.Packed[k0*gs/2:(k0+avx2Groups)*gs/2], tr, m, gs, gb, mse)
		archsimd.ClearAVXUpperBits()
		if !ok {
			break
		}
		if !fp4NoAsm {
			for l, c := range res.codes {
				out.Scales[k0+l] = uint8(c)
			}
			fp4StatsAVX2(&res.fp4Batch, (*[avx2Groups]GroupStats)(out.Stats[k0:]))
			continue
		}
		for l := range avx2Groups {
			k := k0 + l
			out.Scales[k] = uint8(res.codes[l])
			out.Stats[k] = GroupStats{SumSq: res.ss[l], Err: res.err[l], RTNErr: res.rtn[l], Clipped: res.clip[l]}
		}
	}
	archsimd.ClearAVXUpperBits()
	return k0
}

// rowsAbsMax8 returns the largest |x| bit pattern of each lane over the n rows of t.
func rowsAbsMax8(t []float32, n int) archsimd.Uint32x8 {
	var m archsimd.Uint32x8
	for j := range n {
		m = m.Max(archsimd.LoadFloat32x8((*[8]float32)(t[8*j:])).AsUint32x8().And(fp4K8.abs))
	}
	return m
}

// fp4Batch8Groups quantizes eight transposed groups of n elements (m: their absolute maxima) (NVFP4 for 16, with the
// global scale bits gb; MXFP4 for 32): their packed codes to dst, the rest to r. It returns
// false, having written nothing, when a value is not finite.
func fp4Batch8Groups(r *fp4Batch8, dst []byte, t []float32, m archsimd.Uint32x8, n int, gb uint32, mse bool) bool {
	k := &fp4K8
	if m.AsInt32x8().Greater(k.maxFinite.AsInt32x8()).ToBits() != 0 {
		return false
	}
	a := m.AsFloat32x8()
	nv := n == NVFP4GroupSize
	gv := archsimd.BroadcastUint32x8(gb).AsFloat32x8()
	var c0 archsimd.Uint32x8
	var s0 archsimd.Float32x8
	if nv {
		c0 = e4m3x8(roundBF16x8(a.Div(k.fsix)).Mul(gv))
		c0 = k.eps.Merge(c0, c0.Equal(archsimd.Uint32x8{}))
		s0 = nvfp4ScaleX8(c0, gv)
	} else {
		c0 = sra8(m.Add(archsimd.BroadcastUint32x8(0x200000)), 23).AsInt32x8().Sub(archsimd.BroadcastInt32x8(2)).Max(archsimd.Int32x8{}).AsUint32x8()
		s0 = mxfp4ScaleX8(c0)
	}
	best, bestS := c0, s0
	var e0 archsimd.Float32x8
	srch := a.GreaterEqual(k.tiny)
	if !nv {
		srch = srch.And(c0.NotEqual(archsimd.Uint32x8{})) // MXFP4's one offset, -1
	}
	if mse && srch.ToBits() != 0 {
		e0 = fp4ErrRows8(t, n, s0, !nv)
		bestE := e0
		nOff := 1
		if nv {
			nOff = len(nvfp4Offsets)
		}
		for i := range nOff {
			var v archsimd.Uint32x8
			valid := srch
			var s archsimd.Float32x8
			if nv {
				v = c0.Add(archsimd.BroadcastUint32x8(uint32(nvfp4Offsets[i])))
				vi := v.AsInt32x8()
				valid = valid.And(vi.Greater(archsimd.Int32x8{})).And(k.code7e.AsInt32x8().GreaterEqual(vi))
				if valid.ToBits() == 0 {
					continue
				}
				s = nvfp4ScaleX8(v, gv).Merge(s0, valid)
			} else {
				v = c0.Sub(k.one)
				s = mxfp4ScaleX8(v).Merge(s0, valid)
			}
			e := fp4ErrRows8(t, n, s, !nv)
			better := valid.And(e.Less(bestE))
			bestE, best, bestS = e.Merge(bestE, better), v.Merge(best, better), s.Merge(bestS, better)
		}
	}
	var w0, w1, w2, w3 archsimd.Uint32x8
	if fp4NoAsm {
		w0, w1, w2, w3 = fp4PackRows8(r, t, n, bestS, !nv)
	} else {
		var sv [8]float32
		bestS.Store(&sv)
		if nv {
			fp4PackNVAVX2((*[16 * avx2Groups]float32)(t), &sv, &r.fp4Batch)
		} else {
			fp4PackMXAVX2((*[32 * avx2Groups]float32)(t), &sv, &r.fp4Batch)
		}
		w := &r.words
		w0, w1 = archsimd.LoadUint32x8((*[8]uint32)(w[0:])), archsimd.LoadUint32x8((*[8]uint32)(w[8:]))
		w2, w3 = archsimd.LoadUint32x8((*[8]uint32)(w[16:])), archsimd.LoadUint32x8((*[8]uint32)(w[24:]))
	}
	e := archsimd.LoadFloat32x8((*[8]float32)(r.err[:8]))
	if mse {
		e = e0.Merge(e, srch) // groups not searched: their RTN error is their error
	}
	e.Store((*[8]float32)(r.rtn[:8]))
	storeWords8(dst, w0, w1, w2, w3, nv)
	best.Store(&r.codes)
	return true
}

// storeWords8 writes the words of eight groups (w_i: word i of each group; two words a group
// when nv, else four) to dst in output order, the transposition of transpose8: interleaves of
// 32-bit, then 64-bit elements within each 128-bit half, then the halves exchanged.
func storeWords8(dst []byte, w0, w1, w2, w3 archsimd.Uint32x8, nv bool) {
	st := func(i int, v archsimd.Uint32x8) {
		v.Store((*[8]uint32)(unsafe.Pointer((*[32]byte)(dst[32*i:]))))
	}
	a, b := w0.InterleaveLoGrouped(w1), w0.InterleaveHiGrouped(w1)
	if nv { // a: groups 0, 1 | 4, 5; b: groups 2, 3 | 6, 7
		st(0, a.Select128FromPair(0, 2, b))
		st(1, a.Select128FromPair(1, 3, b))
		return
	}
	e, f := w2.InterleaveLoGrouped(w3).AsUint64x4(), w2.InterleaveHiGrouped(w3).AsUint64x4()
	a64, b64 := a.AsUint64x4(), b.AsUint64x4()
	c0, c1 := a64.InterleaveLoGrouped(e).AsUint32x8(), a64.InterleaveHiGrouped(e).AsUint32x8() // groups 0 | 4, 1 | 5
	c2, c3 := b64.InterleaveLoGrouped(f).AsUint32x8(), b64.InterleaveHiGrouped(f).AsUint32x8() // groups 2 | 6, 3 | 7
	st(0, c0.Select128FromPair(0, 2, c1))
	st(1, c2.Select128FromPair(0, 2, c3))
	st(2, c0.Select128FromPair(1, 3, c1))
	st(3, c2.Select128FromPair(1, 3, c3))
}

// e4m3x8 is e4m3x16 in eight lanes.
func e4m3x8(v archsimd.Float32x8) archsimd.Uint32x8 {
	k := &fp4K8
	b := v.AsUint32x8()
	code := sra8(b.Add(k.e4Round).Add(sra8(b, 20).And(k.one)), 20).Sub(k.e4Rebase)
	sub := v.Mul(k.f512).Add(k.rne).AsUint32x8().Sub(k.rne.AsUint32x8())
	code = sub.Merge(code, k.e4MinNormal.AsInt32x8().Greater(b.AsInt32x8()))
	return k.code7e.Merge(code, b.AsInt32x8().GreaterEqual(k.e4Big.AsInt32x8()))
}

// nvfp4ScaleX8 is nvfp4ScaleX16 in eight lanes.
func nvfp4ScaleX8(c archsimd.Uint32x8, g archsimd.Float32x8) archsimd.Float32x8 {
	return c.ShiftAllLeft(20).AsFloat32x8().Mul(fp4K8.p120).Div(g)
}

// mxfp4ScaleX8 is mxfp4ScaleX16 in eight lanes.
func mxfp4ScaleX8(c archsimd.Uint32x8) archsimd.Float32x8 {
	z := c.Equal(archsimd.Uint32x8{})
	return archsimd.BroadcastUint32x8(0x00400000).Merge(c.ShiftAllLeft(23), z).AsFloat32x8()
}

// fp4Ratio8 is fp4Ratio in eight lanes.
func fp4Ratio8(ax, s, inv archsimd.Float32x8, exact bool) archsimd.Uint32x8 {
	k := &fp4K8
	p := ax.Mul(inv).AsUint32x8()
	if !exact && p.Add(k.nearAdd).And(k.nearMask).Equal(archsimd.Uint32x8{}).ToBits() != 0 {
		p = ax.Div(s).AsUint32x8()
	}
	return p
}

// fp4Mag8 is fp4Mag in eight lanes.
func fp4Mag8(p archsimd.Uint32x8) (a, v archsimd.Uint32x8) {
	k := &fp4K8
	a = p.Add(k.bfHalf).Add(sra8(p, 16).And(k.one)).And(k.bfKeep)
	vs := a.AsFloat32x8().Add(k.magic).Sub(k.magic).AsUint32x8()
	vl := a.Add(k.rHalf).Add(sra8(a, 22).And(k.one)).And(k.keep22).Min(k.six)
	return a, vs.Merge(vl, k.small.AsInt32x8().Greater(a.AsInt32x8()))
}

// fp4ErrRows8 is fp4ErrRows in eight lanes.
func fp4ErrRows8(t []float32, n int, s archsimd.Float32x8, exact bool) archsimd.Float32x8 {
	if !fp4NoAsm {
		return fp4ErrAsm8(t, n, s)
	}
	inv := archsimd.BroadcastFloat32x8(1).Div(s)
	return fp4ErrHalf8(t, n, 0, s, inv, exact).Add(fp4ErrHalf8(t, n, 4, s, inv, exact))
}

// fp4ErrHalf8 is fp4ErrHalf in eight lanes.
func fp4ErrHalf8(t []float32, n, off int, s, inv archsimd.Float32x8, exact bool) archsimd.Float32x8 {
	abs := fp4K8.abs
	term := func(j int) archsimd.Float32x8 {
		ax := archsimd.LoadFloat32x8((*[8]float32)(t[8*j:])).AsUint32x8().And(abs).AsFloat32x8()
		_, v := fp4Mag8(fp4Ratio8(ax, s, inv, exact))
		d := ax.Sub(v.AsFloat32x8().Mul(s))
		return d.Mul(d)
	}
	var e0, e1, e2, e3 archsimd.Float32x8
	for j := off; j < n; j += 8 {
		e0 = e0.Add(term(j))
		e1 = e1.Add(term(j + 1))
		e2 = e2.Add(term(j + 2))
		e3 = e3.Add(term(j + 3))
	}
	return e0.Add(e1).Add(e2.Add(e3))
}

// fp4PackRows8 is fp4PackRows in eight lanes: the error, clip counts and Σx² go to the first
// eight lanes of r's fields.
func fp4PackRows8(r *fp4Batch8, t []float32, n int, s archsimd.Float32x8, exact bool) (w0, w1, w2, w3 archsimd.Uint32x8) {
	inv := archsimd.BroadcastFloat32x8(1).Div(s)
	var clip archsimd.Int32x8
	eLo, l0, l1, l2, l3 := fp4PackHalf8(t, n, 0, s, inv, exact, &clip)
	eHi, h0, h1, h2, h3 := fp4PackHalf8(t, n, 4, s, inv, exact, &clip)
	eLo.Add(eHi).Store((*[8]float32)(r.err[:8]))
	clip.Store((*[8]int32)(r.clip[:8]))
	sumSq8(t, n).Store((*[8]float32)(r.ss[:8]))
	return l0.Or(h0.ShiftAllLeft(16)), l1.Or(h1.ShiftAllLeft(16)), l2.Or(h2.ShiftAllLeft(16)), l3.Or(h3.ShiftAllLeft(16))
}

// fp4PackHalf8 is fp4PackHalf in eight lanes.
func fp4PackHalf8(t []float32, n, off int, s, inv archsimd.Float32x8, exact bool, clip *archsimd.Int32x8) (_ archsimd.Float32x8, p0, p1, p2, p3 archsimd.Uint32x8) {
	k := &fp4K8
	c := *clip
	q0, q1, q2, q3 := archsimd.Float32x8{}, archsimd.Float32x8{}, archsimd.Float32x8{}, archsimd.Float32x8{}
	for j := off; j < n; j += 8 {
		var p archsimd.Uint32x8
		for i := 3; i >= 0; i-- {
			x := archsimd.LoadFloat32x8((*[8]float32)(t[8*(j+i):])).AsUint32x8()
			ax := x.And(k.abs).AsFloat32x8()
			a, v := fp4Mag8(fp4Ratio8(ax, s, inv, exact))
			d := ax.Sub(v.AsFloat32x8().Mul(s))
			c = c.Sub(a.AsInt32x8().Greater(k.sixI.AsInt32x8()).ToInt32x8())
			p = p.ShiftAllLeft(4).Or(fp4Code8(v, x))
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
	return q3.Add(q2).Add(q1.Add(q0)), p0, p1, p2, p3
}

// fp4Code8 is fp4Code in eight lanes: the index (v>>22) - 0xfc from 1 on, 1 for 1/2, 0 for 0,
// and bit 3 x's sign (x>>28, arithmetic).
func fp4Code8(v, x archsimd.Uint32x8) archsimd.Uint32x8 {
	k := &fp4K8
	idx := sra8(v, 22).AsInt32x8().Sub(k.fc.AsInt32x8()).Max(archsimd.Int32x8{}).AsUint32x8()
	idx = idx.Add(k.one.And(v.Equal(k.half3f).ToInt32x8().AsUint32x8()))
	return idx.Or(sra8(x, 28).And(k.eight))
}
