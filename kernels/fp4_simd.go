//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"math"
	"math/bits"
	"simd/archsimd"
)

// The FP4 groups one at a time on AVX-512, for the groups after the last whole batch (the
// batches, sixteen or eight groups at once, are fp4batch_avx512.go and fp4batch_avx2.go) and
// with the batches switched off: one Float32x16 holds an NVFP4 group (two an MXFP4 group), so
// vector lane j holds elements j and j+8 (j+16, j+24) of the specification's lane j%8, and the
// specification's eight lanes are the sum of the two halves (in element order) followed by the
// tree ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) of two horizontal adds. An element's value is found
// without its code: |r| rounded to BF16 as in fp4Encode, then below 1 to a multiple of 1/2 by
// adding and subtracting 2^22 (the grid's steps there), from 1 on to one significand bit by the
// same integer rounding as BF16's, nearest even, and saturated at 6: the E2M1 value the
// thresholds of e2m1Mag give. The codes of the chosen scale come from the value's bits. Group
// errors are compared as bit patterns (non-negative floats order as integers), so no scalar
// float instruction runs between the vector ones; the upper halves of the vector registers are
// cleared before the results are stored. Shifts take their counts in vectors (VPSRLVD): a
// shift by a scalar count moves the count into an XMM register with a legacy-SSE MOVQ, whose
// transition penalty after 512-bit instructions cost more than the whole group.

// callFP4Groups quantizes groups k0..k1-1 with their candidates: fp4GroupsScalar, in vectors
// when AVX-512 or AVX2 is in use (fp4_avx2.go).
func callFP4Groups(out FP4Out, src []float32, k0, k1, gs int, cs []fp4Cand) {
	var res [fp4Chunk]fp4Res
	switch lp {
	case &avx512Loops:
		for k := k0; k < k1; k++ {
			c, r := &cs[k-k0], &res[k-k0]
			if gs == NVFP4GroupSize {
				fp4Group16(out.Packed[k*8:(k+1)*8], (*[16]float32)(src[k*16:]), c, r)
			} else {
				fp4Group32(out.Packed[k*16:(k+1)*16], (*[32]float32)(src[k*32:]), c, r)
			}
		}
	case &avx2Loops:
		for k := k0; k < k1; k++ {
			c, r := &cs[k-k0], &res[k-k0]
			if gs == NVFP4GroupSize {
				fp4Group16AVX2(out.Packed[k*8:(k+1)*8], (*[16]float32)(src[k*16:]), c, r)
			} else {
				fp4Group32AVX2(out.Packed[k*16:(k+1)*16], (*[32]float32)(src[k*32:]), c, r)
			}
		}
	default:
		fp4GroupsScalar(out, src, k0, k1, gs, cs)
		return
	}
	archsimd.ClearAVXUpperBits()
	for k := k0; k < k1; k++ {
		r := &res[k-k0]
		out.Scales[k] = cs[k-k0].codes[r.best]
		out.Stats[k] = GroupStats{
			SumSq: math.Float32frombits(r.ss), Err: math.Float32frombits(r.err),
			RTNErr: math.Float32frombits(r.rtn), Clipped: r.clip,
		}
	}
}

// callFP4Batches quantizes whole batches of groups in vectors, sixteen at a time with the
// AVX-512 loops (fp4batch_avx512.go), eight with the AVX2 ones (fp4batch_avx2.go), and returns
// how many groups it did.
func callFP4Batches(out FP4Out, src []float32, ng, gs int, g float32, search Search) int {
	switch {
	case noBatchSearch:
		return 0
	case lp == &avx512Loops:
		return fp4BatchesAVX512(out, src, ng, gs, g, search)
	case lp == &avx2Loops:
		return fp4BatchesAVX2(out, src, ng, gs, g, search)
	}
	return 0
}

// callErrLanesFP4 adds the error sums of ref against the FP4 dequantization with the fused
// vector loops (fp4errsums_avx512.go, fp4errsums_avx2.go) where a is on a lane boundary, and
// reports whether it did; otherwise the caller expands the values and adds them.
func callErrLanesFP4(a *errAcc, ref []float32, packed []byte, scales []float32, g int) bool {
	if a.n&7 != 0 || len(scales) == 0 {
		return false
	}
	switch lp {
	case &avx512Loops:
		errLanesFP4AVX512(a, ref, packed, scales, g)
	case &avx2Loops:
		errLanesFP4AVX2(a, ref, packed, scales, g)
	default:
		return false
	}
	return true
}

// callExpandFP4 is expandFP4Range, sixteen values per vector (a permute of the sixteen E2M1
// values by the codes, times the group's scale) when AVX-512 is in use and the groups and the
// range are whole vectors; eight per vector on AVX2.
func callExpandFP4(dst []float32, p []byte, scales []float32, i0, g int) {
	if g%16 != 0 || i0%16 != 0 || len(dst)%16 != 0 || lp != &avx512Loops && lp != &avx2Loops {
		expandFP4Range(dst, p, scales, i0, g)
		return
	}
	if lp == &avx2Loops {
		expandFP4AVX2(dst, p, scales, i0, g)
	} else {
		expandFP4AVX512(dst, p, scales, i0, g)
	}
	archsimd.ClearAVXUpperBits() // the caller's next float instruction may be scalar
}

// expandFP4AVX512 is expandFP4Range sixteen values per vector.
func expandFP4AVX512(dst []float32, p []byte, scales []float32, i0, g int) {
	table := archsimd.LoadFloat32x16(&e2m1Values)
	dup := archsimd.LoadUint8x16(&fp4DupBytes)
	shift := archsimd.LoadUint32x16(&fp4NibbleShifts)
	low := archsimd.BroadcastUint32x16(15)
	for i := 0; i+16 <= len(dst); i += 16 {
		b := archsimd.BroadcastUint64x2(binary.LittleEndian.Uint64(p[i/2:])).AsUint8x16()
		c := b.PermuteOrZero(dup.AsInt8x16()).ExtendToUint32().ShiftRight(shift).And(low)
		s := archsimd.BroadcastFloat32x16(scales[(i0+i)/g])
		table.Permute(c).Mul(s).Store((*[16]float32)(dst[i:]))
	}
}

// fp4DupBytes repeats each of eight bytes twice; fp4NibbleShifts then picks the low and the
// high nibble in turn.
var (
	fp4DupBytes     = [16]uint8{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}
	fp4NibbleShifts = [16]uint32{0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4}
)

// fp4Res is a group's result as bit patterns: the chosen candidate, its error, the RTN error,
// Σx² and the clipped elements.
type fp4Res struct {
	best         int
	err, rtn, ss uint32
	clip         int32
}

func fp4Group16(dst []byte, x *[16]float32, c *fp4Cand, r *fp4Res) {
	xv := archsimd.LoadFloat32x16(x)
	best, e0, eb := 0, uint32(0), uint32(0)
	if c.n > 1 {
		for i := range c.n {
			q, _, _, _ := fp4Values16(xv, archsimd.BroadcastFloat32x16(c.s[i]))
			d := xv.Sub(q)
			e := fold8(fold16(d.Mul(d)))
			if i == 0 {
				e0, eb = e, e
			} else if e < eb {
				best, eb = i, e
			}
		}
	}
	q, v, sign, a := fp4Values16(xv, archsimd.BroadcastFloat32x16(c.s[best]))
	d := xv.Sub(q)
	r.err = fold8(fold16(d.Mul(d)))
	if c.n == 1 {
		e0 = r.err
	}
	r.best, r.rtn = best, e0
	r.ss = fold8(fold16(xv.Mul(xv)))
	r.clip = int32(bits.OnesCount16(a.Greater(archsimd.BroadcastUint32x16(0x40c00000)).ToBits()))
	binary.LittleEndian.PutUint64(dst, pack16(fp4Codes16(v, sign)))
}

func fp4Group32(dst []byte, x *[32]float32, c *fp4Cand, r *fp4Res) {
	xa := archsimd.LoadFloat32x16((*[16]float32)(x[:16]))
	xb := archsimd.LoadFloat32x16((*[16]float32)(x[16:]))
	best, e0, eb := 0, uint32(0), uint32(0)
	if c.n > 1 {
		for i := range c.n {
			s := archsimd.BroadcastFloat32x16(c.s[i])
			qa, _, _, _ := fp4Values16(xa, s)
			qb, _, _, _ := fp4Values16(xb, s)
			da, db := xa.Sub(qa), xb.Sub(qb)
			e := fold8(fold32(da.Mul(da), db.Mul(db)))
			if i == 0 {
				e0, eb = e, e
			} else if e < eb {
				best, eb = i, e
			}
		}
	}
	s := archsimd.BroadcastFloat32x16(c.s[best])
	qa, va, sa, aa := fp4Values16(xa, s)
	qb, vb, sb, ab := fp4Values16(xb, s)
	da, db := xa.Sub(qa), xb.Sub(qb)
	r.err = fold8(fold32(da.Mul(da), db.Mul(db)))
	if c.n == 1 {
		e0 = r.err
	}
	r.best, r.rtn = best, e0
	r.ss = fold8(fold32(xa.Mul(xa), xb.Mul(xb)))
	six := archsimd.BroadcastUint32x16(0x40c00000)
	r.clip = int32(bits.OnesCount16(aa.Greater(six).ToBits()) + bits.OnesCount16(ab.Greater(six).ToBits()))
	binary.LittleEndian.PutUint64(dst, pack16(fp4Codes16(va, sa)))
	binary.LittleEndian.PutUint64(dst[8:], pack16(fp4Codes16(vb, sb)))
}

// fp4Vec holds the constant vectors of fp4Values16, set once by initFP4Vectors on a CPU with
// AVX-512 (an initialiser would run AVX-512 instructions on every CPU).
var fp4Shift16, fp4Shift22 archsimd.Uint32x16

var fp4Vec struct {
	sign, abs, bfHalf, one, bfKeep, small, rHalf, keep22, six archsimd.Uint32x16
	magic                                                     archsimd.Float32x16
}

var _ = func() bool {
	if archsimd.X86.AVX512() {
		initFP4Vectors()
		initFP4Batch()
	}
	return true
}()

func initFP4Vectors() {
	u := archsimd.BroadcastUint32x16
	v := &fp4Vec
	v.sign, v.abs, v.bfHalf, v.one, v.bfKeep = u(0x80000000), u(0x7fffffff), u(0x7fff), u(1), u(0xffff0000)
	v.small, v.rHalf, v.keep22, v.six = u(0x3f800000), u(0x1fffff), u(0xffc00000), u(0x40c00000)
	v.magic = archsimd.BroadcastFloat32x16(0x1p22)
	fp4Shift16, fp4Shift22 = u(16), u(22)
	archsimd.ClearAVXUpperBits()
}

// fp4Values16 returns, for each lane of x under the effective scale s: the decoded value
// f32(value·s), the value's magnitude bits v, its sign bit and the BF16-rounded |x/s| bits a.
func fp4Values16(x, s archsimd.Float32x16) (q archsimd.Float32x16, v, sign, a archsimd.Uint32x16) {
	k := &fp4Vec
	r := x.Div(s).AsUint32x16()
	sign = r.And(k.sign)
	a = r.And(k.abs)
	a = a.Add(k.bfHalf).Add(a.ShiftRight(fp4Shift16).And(k.one)).And(k.bfKeep)
	small := a.Less(k.small)
	vs := a.AsFloat32x16().Add(k.magic).Sub(k.magic).AsUint32x16()
	vl := a.Add(k.rHalf).Add(a.ShiftRight(fp4Shift22).And(k.one)).And(k.keep22).Min(k.six)
	v = vs.Merge(vl, small)
	q = v.Or(sign).AsFloat32x16().Mul(s)
	return q, v, sign, a
}

// fp4Codes16 returns the E2M1 codes of values with magnitude bits v and sign bits sign: the
// index (v>>22) - 0xfc for 1 and above (1, 1.5, 2, 3, 4, 6 give 2..7), 1 for 1/2, 0 for 0.
func fp4Codes16(v, sign archsimd.Uint32x16) archsimd.Uint32x16 {
	u := func(c uint32) archsimd.Uint32x16 { return archsimd.BroadcastUint32x16(c) }
	idx := v.ShiftRight(u(22)).AsInt32x16().Sub(archsimd.BroadcastInt32x16(0xfc)).Max(archsimd.BroadcastInt32x16(0)).AsUint32x16()
	idx = idx.Add(u(1).Masked(v.Equal(u(0x3f000000))))
	return idx.Or(sign.ShiftRight(u(28)))
}

// pack16 returns the sixteen codes c (one per lane) as eight bytes, two codes to a byte, the
// lower lane in the low nibble, little-endian.
func pack16(c archsimd.Uint32x16) uint64 {
	y := c.TruncateToUint8().AsUint16x8()
	return y.Or(y.ShiftRight(archsimd.BroadcastUint16x8(4))).TruncateToUint8().AsUint64x2().GetElem(0)
}

// fold16 adds the upper half of e to its lower half: the specification's eight lanes of the
// sixteen elements in e.
func fold16(e archsimd.Float32x16) archsimd.Float32x8 { return e.GetLo().Add(e.GetHi()) }

// fold32 is fold16 for the thirty-two elements of a then b: each lane adds its four elements
// in element order.
func fold32(a, b archsimd.Float32x16) archsimd.Float32x8 {
	return a.GetLo().Add(a.GetHi()).Add(b.GetLo()).Add(b.GetHi())
}

// fold8 returns the bits of ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) for the lanes l of f.
func fold8(f archsimd.Float32x8) uint32 {
	t := f.AddPairsGrouped(f)
	t = t.AddPairsGrouped(t)
	return t.GetLo().Add(t.GetHi()).AsUint32x4().GetElem(0)
}
