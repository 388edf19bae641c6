//go:build goexperiment.simd && amd64

package kernels

import (
	"math/bits"
	"simd/archsimd"
	"unsafe"
)

// AVX-512 forms of the loops where 512-bit vectors pay: the scale search evaluates two
// candidate scales at once (lanes 0-7 the first, 8-15 the second, each half being the eight
// lanes of the specification), and the error sums keep their eight float64 lanes in one
// Float64x8 register each. The other loops are the AVX2 ones.
var avx512Loops = func() loopSet {
	s := avx2Loops
	s.name = "avx512"
	s.errMulBatch = errMulBatchAVX512
	s.errLanes = errLanesAVX512
	s.errLanesInt4 = errLanesInt4AVX512
	s.encodeE4M3 = encodeE4M3AVX512
	s.gemmTile = gemmTileAVX512
	s.axpy = axpyAVX512
	return s
}()

var _ = func() bool {
	if archsimd.X86.AVX512() {
		addLoops(&avx512Loops)
	}
	return true
}()

func bc16(v float32) archsimd.Float32x16 { return archsimd.BroadcastFloat32x16(v) }

func pair16(a, b float32) archsimd.Float32x16 {
	return archsimd.Float32x16{}.SetLo(bc(a)).SetHi(bc(b))
}

// errMulBatchAVX512 evaluates four candidates per pass over x (two per Float32x16), then
// reduces the four eight-lane sums together: three horizontal adds give, for each candidate,
// ((l0+l1)+(l2+l3)) and ((l4+l5)+(l6+l7)), whose sum is the specification's order.
func errMulBatchAVX512(x, s, errs []float32) {
	errs = errs[:len(s)]
	i := 0
	for ; i+4 <= len(s); i += 4 {
		c := s[i : i+4 : i+4]
		err4(x, c[0], c[1], c[2], c[3]).StoreSlice(errs[i : i+4])
	}
	if r := len(s) - i; r > 0 {
		// The last one to three candidates, padded by repeating the last one.
		var c, e [4]float32
		for j := range c {
			c[j] = s[i+min(j, r-1)]
		}
		err4(x, c[0], c[1], c[2], c[3]).StoreSlice(e[:])
		copy(errs[i:], e[:r])
	}
}

// err4 returns errMul(x, c, 1/c) for four candidates c.
func err4(x []float32, c0, c1, c2, c3 float32) archsimd.Float32x4 {
	lo, hi, r := bc16(-8), bc16(7), bc16(rne)
	vsA, viA := pair16(c0, c1), pair16(1/c0, 1/c1)
	vsB, viB := pair16(c2, c3), pair16(1/c2, 1/c3)
	var eA, eB archsimd.Float32x16
	for k := 0; k+8 <= len(x); k += 8 {
		v8 := archsimd.LoadFloat32x8Slice(x[k:])
		v := archsimd.Float32x16{}.SetLo(v8).SetHi(v8)
		qA := v.Mul(viA).Max(lo).Min(hi).Add(r).Sub(r)
		qB := v.Mul(viB).Max(lo).Min(hi).Add(r).Sub(r)
		dA := v.Sub(qA.Mul(vsA))
		dB := v.Sub(qB.Mul(vsB))
		eA = eA.Add(dA.Mul(dA))
		eB = eB.Add(dB.Mul(dB))
	}
	u := eA.GetLo().AddPairsGrouped(eA.GetHi())
	w := eB.GetLo().AddPairsGrouped(eB.GetHi())
	z := u.AddPairsGrouped(w)
	return z.GetLo().Add(z.GetHi())
}

// errVec512 holds the eight float64 lanes of errAcc while a loop runs.
type errVec512 struct{ sr, se, sa, dt, sg, mx, ix archsimd.Float64x8 }

func (a *errAcc) vec512() errVec512 {
	v := a.vec()
	return errVec512{
		sr: join(v.sr0, v.sr1), se: join(v.se0, v.se1), sa: join(v.sa0, v.sa1), dt: join(v.dt0, v.dt1),
		sg: join(v.sg0, v.sg1), mx: join(v.mx0, v.mx1), ix: join(v.ix0, v.ix1),
	}
}

func (a *errAcc) store512(v *errVec512) {
	w := errVec{
		sr0: v.sr.GetLo(), sr1: v.sr.GetHi(), se0: v.se.GetLo(), se1: v.se.GetHi(), sa0: v.sa.GetLo(), sa1: v.sa.GetHi(),
		dt0: v.dt.GetLo(), dt1: v.dt.GetHi(), sg0: v.sg.GetLo(), sg1: v.sg.GetHi(), mx0: v.mx.GetLo(), mx1: v.mx.GetHi(),
		ix0: v.ix.GetLo(), ix1: v.ix.GetHi(),
	}
	a.store(&w)
}

func join(lo, hi archsimd.Float64x4) archsimd.Float64x8 {
	return archsimd.Float64x8{}.SetLo(lo).SetHi(hi)
}

var absMask64x8 = archsimd.BroadcastUint64x8(0x7fffffffffffffff)

// run adds ref against got (whole multiples of eight elements, the first at indices idx) and
// returns the indices of the next eight. The seven accumulators are copied into locals for the
// loop: Go keeps a struct of more than four fields in memory, and its loads and stores would
// lengthen every accumulator's dependency chain.
func (v *errVec512) run(ref, got []float32, idx archsimd.Float64x8) archsimd.Float64x8 {
	sr, se, sa, dt, sg, mx, ix := v.sr, v.se, v.sa, v.dt, v.sg, v.mx, v.ix
	eight := archsimd.BroadcastFloat64x8(8)
	got = got[:len(ref)]
	for len(ref) >= 8 {
		r := archsimd.LoadFloat32x8((*[8]float32)(ref)).ConvertToFloat64()
		g := archsimd.LoadFloat32x8((*[8]float32)(got)).ConvertToFloat64()
		e := g.Sub(r)
		ab := e.AsUint64x8().And(absMask64x8).AsFloat64x8()
		sr = sr.Add(r.Mul(r))
		se = se.Add(e.Mul(e))
		sa = sa.Add(ab)
		dt = dt.Add(r.Mul(g))
		sg = sg.Add(g.Mul(g))
		m := ab.Greater(mx)
		mx = ab.Merge(mx, m)
		ix = idx.Merge(ix, m)
		idx = idx.Add(eight)
		ref, got = ref[8:], got[8:]
	}
	v.sr, v.se, v.sa, v.dt, v.sg, v.mx, v.ix = sr, se, sa, dt, sg, mx, ix
	return idx
}

var laneIdx8 = archsimd.LoadFloat64x8Slice([]float64{0, 1, 2, 3, 4, 5, 6, 7})

func errLanesAVX512(a *errAcc, ref, got []float32) {
	got = got[:len(ref)]
	for a.n&7 != 0 && len(ref) > 0 {
		a.add(ref[0], got[0])
		ref, got = ref[1:], got[1:]
	}
	if n := len(ref) &^ 7; n > 0 {
		v := a.vec512()
		v.run(ref[:n], got[:n], archsimd.BroadcastFloat64x8(float64(a.n)).Add(laneIdx8))
		a.n += int64(n)
		a.store512(&v)
		ref, got = ref[n:], got[n:]
	}
	for i, r := range ref {
		a.add(r, got[i])
	}
}

// errLanesInt4AVX512 expands the levels into a stack buffer 256 at a time (vector nibble
// decode, then (n-8)·s as the scalar table holds it) and runs the error sums over it.
func errLanesInt4AVX512(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	if a.n&7 != 0 {
		errLanesInt4Scalar(a, ref, packed, scales, g)
		return
	}
	v := a.vec512()
	idx := archsimd.BroadcastFloat64x8(float64(a.n)).Add(laneIdx8)
	shr := archsimd.LoadUint32x8Slice(nibbleShifts[:])
	fifteen := archsimd.BroadcastUint32x8(15)
	minus8 := bc(-8)
	var buf [256]float32
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(packed))), len(packed)/4)
	n := 0 // elements in buf
	for k, s := range scales {
		vs := bc(s)
		for _, w := range words[k*g/8 : (k+1)*g/8] {
			nib := archsimd.BroadcastUint32x8(w).ShiftRight(shr).And(fifteen)
			nib.AsInt32x8().ConvertToFloat32().Add(minus8).Mul(vs).Store((*[8]float32)(buf[n:]))
			if n += 8; n == len(buf) {
				idx = v.run(ref[:n], buf[:n], idx)
				a.n += int64(n)
				ref, n = ref[n:], 0
			}
		}
	}
	if n > 0 {
		v.run(ref[:n], buf[:n], idx)
		a.n += int64(n)
	}
	a.store512(&v)
}

// candidatesPosAVX512 appends the positive candidates of candidates to dst (which has room for
// len(p.Pos)+16 more) sixteen at a time: s_i = bf16(a·k_i) rounded as Float32ToBF16 does, kept
// when s_i differs from s_(i-1) (s_(-1) = 0) and from sR. As the k_i rise, so do the s_i, and
// "differs from the previous scale" is then exactly the scalar "differs from the last kept".
func candidatesPosAVX512(dst []float32, a, sR float32, p *Int4Params) []float32 {
	va, vsR := bc16(a), bc16(sR)
	n := len(p.Pos)
	out := len(dst)
	dst = dst[:cap(dst)]
	for i := 0; i < n; i += 16 {
		s := roundBF16x16(archsimd.LoadFloat32x16Slice(p.posPad[1+i:]).Mul(va))
		prev := roundBF16x16(archsimd.LoadFloat32x16Slice(p.posPad[i:]).Mul(va))
		valid := archsimd.Mask32x16FromBits(uint16(uint32(1)<<min(16, n-i) - 1))
		keep := s.NotEqual(prev).And(s.NotEqual(vsR)).And(valid)
		s.Compress(keep).StoreSlice(dst[out : out+16])
		out += bits.OnesCount16(keep.ToBits())
	}
	return dst[:out]
}

var (
	bf16Round = archsimd.BroadcastUint32x16(0x7fff)
	bf16One   = archsimd.BroadcastUint32x16(1)
	bf16Keep  = archsimd.BroadcastUint32x16(0xffff0000)
)

// roundBF16x16 is floatcodec.RoundBF16 for finite values: b + 0x7fff + (b>>16)&1, truncated.
func roundBF16x16(v archsimd.Float32x16) archsimd.Float32x16 {
	b := v.AsUint32x16()
	return b.Add(bf16Round).Add(b.ShiftAllRight(16).And(bf16One)).And(bf16Keep).AsFloat32x16()
}

func bcu16(v uint32) archsimd.Uint32x16 { return archsimd.BroadcastUint32x16(v) }

// encodeE4M3AVX512 is encodeE4M3Scalar sixteen at a time: the IEEE division, then the three
// cases of e4m3 (saturated or NaN, normal with round-to-nearest-even on the bit pattern,
// subnormal through the float32 rounding trick) computed for every lane and selected by mask.
func encodeE4M3AVX512(codes []byte, src []float32, s float32) {
	codes = codes[:len(src)]
	vs := bc16(s)
	// The constants live in registers for the loop (broadcasts in the loop are redone each time).
	c80, c7fff, c7ffff, one, bias := bcu16(0x80), bcu16(0x7fffffff), bcu16(0x7ffff), bcu16(1), bcu16(120<<3)
	f512, frne, subBias := bc16(512), bc16(rne), bcu16(0x4b400000)
	minNormal, inf, satur := archsimd.BroadcastInt32x16(0x3c800000), archsimd.BroadcastInt32x16(0x7f800000), archsimd.BroadcastInt32x16(0x43e00000)
	c7e, c7f := bcu16(0x7e), bcu16(0x7f)
	for len(src) >= 16 {
		b := archsimd.LoadFloat32x16((*[16]float32)(src)).Div(vs).AsUint32x16()
		sign := b.ShiftAllRight(24).And(c80)
		a := b.And(c7fff)
		normal := a.Add(c7ffff).Add(a.ShiftAllRight(20).And(one)).ShiftAllRight(20).Sub(bias)
		sub := a.AsFloat32x16().Mul(f512).Add(frne).AsUint32x16().Sub(subBias)
		ai := a.AsInt32x16()
		code := normal.Merge(sub, ai.GreaterEqual(minNormal))
		big := c7e.Merge(c7f, ai.LessEqual(inf))
		code = big.Merge(code, ai.GreaterEqual(satur))
		code.Or(sign).TruncateToUint8().StoreSlice(codes)
		src, codes = src[16:], codes[16:]
	}
	encodeE4M3Scalar(codes, src, s)
}

// errLanesFP8AVX512 is ErrorSumsFP8Block's loop: the codes of the slab are decoded in order
// (block scale by block scale, across row ends, as the slab is one slice) into a stack buffer
// and the sums run over it 512 elements at a time, the lanes staying in registers between.
func errLanesFP8AVX512(a *errAcc, ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) {
	if a.n&7 != 0 {
		errLanesFP8(a, ref, codes, scale, rows, cols, bh, bw)
		return
	}
	v := a.vec512()
	idx := archsimd.BroadcastFloat64x8(float64(a.n)).Add(laneIdx8)
	var buf [512 + 256]float32
	n := 0 // values in buf
	sc := ceilDiv(cols, bw)
	for r := range rows {
		srow := scale[(r/bh)*sc : (r/bh+1)*sc]
		c := codes[r*cols : (r+1)*cols]
		for bj := 0; bj*bw < cols; bj++ {
			for b0, b1 := bj*bw, min(cols, (bj+1)*bw); b0 < b1; {
				m := min(b1-b0, len(buf)-n)
				decodeE4M3AVX2(buf[n:n+m], c[b0:b0+m], srow[bj])
				n, b0 = n+m, b0+m
				if n >= 512 {
					k := n &^ 7
					idx = v.run(ref[:k], buf[:k], idx)
					a.n += int64(k)
					ref = ref[k:]
					n = copy(buf[:], buf[k:n])
				}
			}
		}
	}
	k := n &^ 7
	v.run(ref[:k], buf[:k], idx)
	a.n += int64(k)
	a.store512(&v)
	for i := k; i < n; i++ {
		a.add(ref[i], buf[i])
	}
}
