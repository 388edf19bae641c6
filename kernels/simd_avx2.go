//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"math"
	"math/bits"
	"simd/archsimd"
	"unsafe"
)

// AVX2 forms of the inner loops (Go's simd/archsimd, GOEXPERIMENT=simd). One Float32x8 vector
// holds the eight lanes of the specification, so each loop performs, lane by lane, exactly the
// scalar operations in the scalar order: the same IEEE float32 multiplications, divisions,
// additions and the same rounding trick, never a fused multiply-add. The results are therefore
// bit-identical by construction, and the tests compare every loop against the scalar one on
// random and adversarial input.

var avx2Loops = loopSet{
	name:          "avx2",
	absMaxBits:    absMaxBitsAVX2,
	sumSq:         sumSqAVX2,
	errMulBatch:   errMulBatchAVX2,
	errDiv:        errDivAVX2,
	errSumsMul:    errSumsMulAVX2,
	errSumsDiv:    errSumsDivAVX2,
	packDiv:       packDivAVX2,
	packMul:       packMulAVX2,
	wSums:         wSumsAVX2,
	errLanes:      errLanesAVX2,
	errLanesInt4:  errLanesInt4AVX2,
	decodeE4M3:    decodeE4M3AVX2,
	encodeE4M3:    encodeE4M3AVX2,
	blockAbsMax:   blockAbsMaxAVX2,
	encodeE4M3Row: encodeE4M3RowAVX2,
	gemmTile:      gemmTileAVX2,
	axpy:          axpyAVX2,
}

// A package-level variable, not init: variables are initialised before any init function runs,
// so the set is registered before loops.go's init picks the fastest.
var _ = func() bool {
	if archsimd.X86.AVX2() && archsimd.X86.FMA() { // every AVX2 server CPU has FMA
		// Set here, not by initialisers: those would run AVX2 instructions on any CPU.
		absMask64 = archsimd.BroadcastUint64x4(0x7fffffffffffffff)
		archsimd.ClearAVXUpperBits()
		addLoops(&avx2Loops)
	}
	return true
}()

func bc(v float32) archsimd.Float32x8 { return archsimd.BroadcastFloat32x8(v) }

// levelAVX2 is level: clamp to [-8, 7], then (v + 1.5·2^23) - 1.5·2^23. It also returns the
// intermediate v + 1.5·2^23, whose low mantissa bits hold the level.
func levelAVX2(v archsimd.Float32x8) (q, r archsimd.Float32x8) {
	r = v.Max(bc(-8)).Min(bc(7)).Add(bc(rne))
	return r.Sub(bc(rne)), r
}

func blockAbsMaxAVX2(src []float32, cols, r0, r1, c0, c1 int) uint32 {
	return blockAbsMaxBy(absMaxBitsAVX2, src, cols, r0, r1, c0, c1)
}

func encodeE4M3RowAVX2(codes []byte, row []float32, sc []float32) {
	encodeE4M3RowBy(encodeE4M3AVX2, codes, row, sc)
}

func absMaxBitsAVX2(x []float32) uint32 {
	m := archsimd.BroadcastUint32x8(0)
	mask := archsimd.BroadcastUint32x8(0x7fffffff)
	for len(x) >= 8 {
		m = m.Max(archsimd.LoadFloat32x8Slice(x).AsUint32x8().And(mask))
		x = x[8:]
	}
	h := m.GetLo().Max(m.GetHi()) // the maximum in registers: a store and eight loads cost more
	h = h.Max(h.PermuteScalars(2, 3, 0, 1))
	h = h.Max(h.PermuteScalars(1, 0, 3, 2))
	m0 := math.Float32bits(lane0(h.AsFloat32x4()))
	if len(x) == 0 {
		return m0
	}
	return max(m0, absMaxBits(x))
}

func sumSqAVX2(x []float32) float32 {
	var s archsimd.Float32x8
	for len(x) >= 8 {
		v := archsimd.LoadFloat32x8Slice(x)
		s = s.Add(v.Mul(v))
		x = x[8:]
	}
	return lane0(sum8Vec(s))
}

// sum8Vec is sum8 in lane 0 of a vector, without leaving the registers: horizontal adds pair
// the lanes exactly as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
func sum8Vec(v archsimd.Float32x8) archsimd.Float32x4 {
	a := v.GetLo().AddPairs(v.GetHi()) // l0+l1, l2+l3, l4+l5, l6+l7
	b := a.AddPairs(a)                 // (l0+l1)+(l2+l3), (l4+l5)+(l6+l7), ...
	return b.AddPairs(b)               // lane 0: the two halves added, as hsum8
}

func errMulBatchAVX2(x, s, errs []float32) {
	errs = errs[:len(s)]
	for i := range s {
		vs := bcAt(&s[i])
		vi := bc(1).Div(vs)
		var e archsimd.Float32x8
		for k := 0; k+8 <= len(x); k += 8 {
			v := archsimd.LoadFloat32x8Slice(x[k:])
			q, _ := levelAVX2(v.Mul(vi))
			d := v.Sub(q.Mul(vs))
			e = e.Add(d.Mul(d))
		}
		storeLane0(&errs[i], sum8Vec(e))
	}
	archsimd.ClearAVXUpperBits()
}

func errDivAVX2(x []float32, s float32) float32 {
	vs := bc(s)
	var e archsimd.Float32x8
	for len(x) >= 8 {
		v := archsimd.LoadFloat32x8Slice(x)
		q, _ := levelAVX2(v.Div(vs))
		d := v.Sub(q.Mul(vs))
		e = e.Add(d.Mul(d))
		x = x[8:]
	}
	return lane0(sum8Vec(e))
}

func errSumsMulAVX2(x []float32, s, inv float32) (e, xq, qq float32) {
	return errSumsAVX2(x, s, inv, false)
}

func errSumsDivAVX2(x []float32, s float32) (e, xq, qq float32) { return errSumsAVX2(x, s, 0, true) }

// errSumsAVX2 is errSumsDiv (div) or errSumsMul: squared error, Σx·q and Σq².
func errSumsAVX2(x []float32, s, inv float32, div bool) (e, xq, qq float32) {
	vs, vi := bc(s), bc(inv)
	var ev, xv, qv archsimd.Float32x8
	for len(x) >= 8 {
		v := archsimd.LoadFloat32x8Slice(x)
		q, _ := levelAVX2(scaled(v, vs, vi, div))
		d := v.Sub(q.Mul(vs))
		ev = ev.Add(d.Mul(d))
		xv = xv.Add(v.Mul(q))
		qv = qv.Add(q.Mul(q))
		x = x[8:]
	}
	return lane0x3(sum8Vec(ev), sum8Vec(xv), sum8Vec(qv))
}

// scaled is x/s for the RTN levels (div) and x·(1/s) for a searched scale.
func scaled(v, vs, vi archsimd.Float32x8, div bool) archsimd.Float32x8 {
	if div {
		return v.Div(vs)
	}
	return v.Mul(vi)
}

// nibbleShifts places lane j's nibble at bits 4j..4j+3 of the packed word.
var nibbleShifts = [8]uint32{0, 4, 8, 12, 16, 20, 24, 28}

// evenLanes moves the even lanes of a vector of eight to its low half.
var evenLanes = [8]uint32{0, 2, 4, 6, 1, 3, 5, 7}

// packAVX2 is packDiv (div) or packMul: levels, nibbles, error, Σx² and clip count. Four words
// (32 elements) are combined at a time with horizontal adds (the nibbles occupy disjoint bits,
// so adding them is or-ing them).
func packAVX2(dst []byte, x []float32, s, inv float32, div bool) GroupStats {
	vs, vi := bc(s), bc(inv)
	hi, lo := bc(7.5), bc(-8.5)
	sh := archsimd.LoadUint32x8Slice(nibbleShifts[:])
	eight, fifteen := archsimd.BroadcastUint32x8(8), archsimd.BroadcastUint32x8(15)
	var ev, sv archsimd.Float32x8
	var clip int
	words := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/4)
	step := func(v archsimd.Float32x8) archsimd.Uint32x8 {
		f := scaled(v, vs, vi, div)
		clip += bits.OnesCount8(f.GreaterEqual(hi).Or(f.Less(lo)).ToBits())
		q, r := levelAVX2(f)
		d := v.Sub(q.Mul(vs))
		ev = ev.Add(d.Mul(d))
		sv = sv.Add(v.Mul(v))
		return r.AsUint32x8().Add(eight).And(fifteen).ShiftLeft(sh)
	}
	w := 0
	for len(x) >= 32 {
		n0 := step(archsimd.LoadFloat32x8Slice(x))
		n1 := step(archsimd.LoadFloat32x8Slice(x[8:]))
		n2 := step(archsimd.LoadFloat32x8Slice(x[16:]))
		n3 := step(archsimd.LoadFloat32x8Slice(x[24:]))
		c := n0.AddPairsGrouped(n1).AddPairsGrouped(n2.AddPairsGrouped(n3))
		c.GetLo().Add(c.GetHi()).StoreSlice(words[w : w+4])
		w += 4
		x = x[32:]
	}
	for len(x) >= 8 {
		n := step(archsimd.LoadFloat32x8Slice(x))
		c := n.GetLo().Add(n.GetHi())
		c = c.AddPairs(c)
		c = c.AddPairs(c)
		words[w] = c.GetElem(0)
		w++
		x = x[8:]
	}
	sq, e := lane0x2(sum8Vec(sv), sum8Vec(ev))
	return GroupStats{SumSq: sq, Err: e, Clipped: int32(clip)}
}

func packDivAVX2(dst []byte, x []float32, s float32) GroupStats {
	return packAVX2(dst, x, s, 0, true)
}

func packMulAVX2(dst []byte, x []float32, s, inv float32) GroupStats {
	return packAVX2(dst, x, s, inv, false)
}

func wSumsAVX2(x, w []float32, s, inv float32, div bool) (e, xq, qq float32) {
	if len(x)%8 != 0 {
		return wSums(x, w, s, inv, div)
	}
	vs, vi := bc(s), bc(inv)
	var ev, xv, qv archsimd.Float32x8
	w = w[:len(x)]
	for len(x) >= 8 {
		v, wi := archsimd.LoadFloat32x8Slice(x), archsimd.LoadFloat32x8Slice(w)
		q, _ := levelAVX2(scaled(v, vs, vi, div))
		d := v.Sub(q.Mul(vs))
		ev = ev.Add(wi.Mul(d.Mul(d)))
		xv = xv.Add(wi.Mul(v).Mul(q))
		qv = qv.Add(wi.Mul(q).Mul(q))
		x, w = x[8:], w[8:]
	}
	return lane0x3(sum8Vec(ev), sum8Vec(xv), sum8Vec(qv))
}

// errLanesAVX2 takes the first eight elements of a slice through the scalar step (as it does
// elements off the lane boundary), so that a NaN first element of a lane stays its maximum.
func errLanesAVX2(a *errAcc, ref, got []float32) {
	got = got[:len(ref)]
	for (a.n&7 != 0 || a.n < 8) && len(ref) > 0 {
		a.add(ref[0], got[0])
		ref, got = ref[1:], got[1:]
	}
	if n := len(ref) &^ 7; n > 0 {
		var s sums256
		a.load256(&s)
		a.add256(&s, ref[:n], got[:n])
		a.save256(&s)
		archsimd.ClearAVXUpperBits()
		ref, got = ref[n:], got[n:]
	}
	for i, r := range ref {
		a.add(r, got[i])
	}
}

// errLanesInt4AVX2 expands the levels into a stack buffer 256 at a time (vector nibble decode,
// then (n-8)·s as the scalar table holds it) and runs the error sums over it.
func errLanesInt4AVX2(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	if a.n&7 != 0 {
		errLanesInt4Scalar(a, ref, packed, scales, g)
		return
	}
	if a.n < 8 && len(scales) > 0 { // the first group through the scalar step, as errLanesAVX2
		errLanesInt4Scalar(a, ref[:g], packed[:g/2], scales[:1], g)
		ref, packed, scales = ref[g:], packed[g/2:], scales[1:]
	}
	errLanesInt4FMA(a, ref, packed, scales, g)
}

// decodeE4M3AVX2 decodes e4m3fn codes without a table: the seven magnitude bits placed at bit
// 20 form a float32 whose value times 2^120 is the e4m3 value, normal or subnormal, exactly;
// the sign is or-ed in, then both NaN codes become the positive quiet NaN the scalar table holds
// (so a NaN keeps no sign through a decode and re-encode), and the product with s is rounded once.
func decodeE4M3AVX2(dst []float32, codes []byte, s float32) {
	dst = dst[:len(codes)]
	// The scalar tail first, while the upper halves are clean.
	t := len(codes) &^ 7
	decodeE4M3Scalar(dst[t:], codes[t:], s)
	dst, codes = dst[:t], codes[:t]
	vs := bc(s)
	p120 := bc(0x1p120)
	m7f := archsimd.BroadcastUint32x8(0x7f)
	nan := archsimd.BroadcastUint32x8(0x7fc00000)
	for len(codes) >= 8 {
		c := archsimd.BroadcastUint64x2(binary.LittleEndian.Uint64(codes)).AsUint8x16().ExtendLo8ToUint32()
		decode8(c, m7f, nan, p120).Mul(vs).StoreSlice(dst)
		codes, dst = codes[8:], dst[8:]
	}
	archsimd.ClearAVXUpperBits()
}

func decode8(c, m7f, nan archsimd.Uint32x8, p120 archsimd.Float32x8) archsimd.Float32x8 {
	mag := c.And(m7f)
	f := mag.ShiftAllLeft(20).AsFloat32x8().Mul(p120).AsUint32x8()
	f = f.Or(sra8(c, 7).ShiftAllLeft(31)) // c is a byte
	return nan.Merge(f, mag.Equal(m7f)).AsFloat32x8()
}

// lowBytes gathers the low byte of each 32-bit lane into the first four bytes of its 128-bit
// half (VPSHUFB; -1 clears a byte).
var lowBytes = [32]int8{0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// encodeE4M3AVX2 is encodeE4M3Scalar eight at a time with the lane operations of the AVX-512
// encoder's general case (so the same codes); AVX2 has no narrowing store, so the eight codes
// are gathered by a byte shuffle and leave as one 64-bit store.
func encodeE4M3AVX2(codes []byte, src []float32, s float32) {
	codes = codes[:len(src)]
	// The scalar tail first, while the upper halves are clean.
	t := len(src) &^ 7
	encodeE4M3Scalar(codes[t:], src[t:], s)
	codes, src = codes[:t], src[:t]
	vs := bc(s)
	bu := archsimd.BroadcastUint32x8
	c80, c7fff, c7ffff, one, bias := bu(0x80), bu(0x7fffffff), bu(0x7ffff), bu(1), bu(120<<3)
	f512, frne, subBias := bc(512), bc(rne), bu(0x4b400000)
	minNormal, inf, satur := archsimd.BroadcastInt32x8(0x3c800000), archsimd.BroadcastInt32x8(0x7f800000), archsimd.BroadcastInt32x8(0x43e00000)
	c7e, c7f := bu(0x7e), bu(0x7f)
	low := archsimd.LoadInt8x32(&lowBytes)
	for len(src) >= 8 {
		b := archsimd.LoadFloat32x8Slice(src).Div(vs).AsUint32x8()
		sign := sra8(b, 24).And(c80)
		a := b.And(c7fff)
		normal := sra8(a.Add(c7ffff).Add(sra8(a, 20).And(one)), 20).Sub(bias)
		sub := a.AsFloat32x8().Mul(f512).Add(frne).AsUint32x8().Sub(subBias)
		ai := a.AsInt32x8()
		code := normal.Merge(sub, ai.GreaterEqual(minNormal))
		big := c7e.Merge(c7f, ai.LessEqual(inf))
		code = big.Merge(code, ai.GreaterEqual(satur))
		c := code.Or(sign).AsUint8x32().PermuteOrZeroGrouped(low)
		binary.LittleEndian.PutUint64(codes, uint64(c.GetLo().AsUint32x4().GetElem(0))|uint64(c.GetHi().AsUint32x4().GetElem(0))<<32)
		src, codes = src[8:], codes[8:]
	}
	archsimd.ClearAVXUpperBits()
}
