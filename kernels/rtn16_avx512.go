//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"math/bits"
	"simd/archsimd"

	"pdq/internal/floatcodec"
)

// RTN quantization of sixteen groups at once, in their natural layout (no transpose: RTN has no
// search whose steps want one group per lane). A batch is read twice: once for the sixteen
// absolute maxima, once to quantize. In the second pass the groups go in pairs: each vector
// holds eight consecutive elements of group a in lanes 0-7 and the same eight of group b in
// lanes 8-15, which is one packed word of each and, lane for lane, the specification's eight
// sum lanes of each, so the error and Σx² accumulate in the scalar order with no horizontal
// step inside a group. At the end the eight pair vectors of each sum are reduced to one lane
// per group by pairwise adds of even and odd lanes, which is the tree
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Each element is quantized with packDiv's operations in
// packDiv's order (IEEE division, clamp, the rounding trick with 1.5·2^23+8, whose low bits are
// the nibble q+8 and which gives the same level as the trick with 1.5·2^23: 1.5·2^23+8 is even).

// quantRTNBatchesAVX512 quantizes the groups of src (groups of g, a multiple of 16) with the RTN
// rule in whole batches of sixteen and returns how many it did; the caller does the rest one
// group at a time. Groups quantGroup treats apart (non-finite, zero scale) are redone by
// quantGroup, so that the first non-finite value is reported as the per-group loop reports it.
func quantRTNBatchesAVX512(out Int4Out, src []float32, ng int, p *Int4Params) (int, error) {
	g := p.GroupSize
	var res rtnBatch
	k0 := 0
	for ; k0+batchGroups <= ng; k0 += batchGroups {
		ok := rtnBatch16(&res, src[k0*g:(k0+batchGroups)*g], out.Packed[k0*g/2:(k0+batchGroups)*g/2], g)
		sc := out.Scales[2*k0 : 2*(k0+batchGroups)]
		for l := range batchGroups {
			k := k0 + l
			if ok>>l&1 != 0 {
				out.Stats[k] = GroupStats{SumSq: res.ss[l], Err: res.err[l], RTNErr: res.err[l], Clipped: res.clip[l]}
				binary.LittleEndian.PutUint16(sc[2*l:], res.scale[l])
				continue
			}
			x := src[k*g : (k+1)*g : (k+1)*g]
			s, st, bad := quantGroup(out.Packed[k*g/2:(k+1)*g/2], x, p)
			if bad >= 0 {
				return k, &NonFiniteError{Index: int64(k*g + bad), Value: x[bad]}
			}
			binary.LittleEndian.PutUint16(sc[2*l:], floatcodec.Float32ToBF16(s))
			out.Stats[k] = st
		}
	}
	return k0, nil
}

// rtnBatch holds the results of sixteen groups.
type rtnBatch struct {
	err, ss [batchGroups]float32
	clip    [batchGroups]int32
	scale   [batchGroups]uint16 // BF16 codes
}

// The permutes of the RTN batch: lanes 0-7 of two vectors, lanes 8-15 of two vectors, the even
// and the odd lanes of two vectors, and for pair i the scales of groups 2i and 2i+1.
var (
	rtnLo, rtnHi, rtnEven, rtnOdd archsimd.Uint32x16
	rtnPairScale                  [batchGroups / 2]archsimd.Uint32x16
)

func init() {
	var lo, hi, even, odd [16]uint32
	for p := range 16 {
		lo[p] = uint32(p%8 + 16*(p/8))
		hi[p] = lo[p] + 8
		even[p], odd[p] = uint32(2*p), uint32(2*p+1)
	}
	rtnLo, rtnHi = archsimd.LoadUint32x16(&lo), archsimd.LoadUint32x16(&hi)
	rtnEven, rtnOdd = archsimd.LoadUint32x16(&even), archsimd.LoadUint32x16(&odd)
	for i := range rtnPairScale {
		var v [16]uint32
		for p := range v {
			v[p] = uint32(2*i + p/8)
		}
		rtnPairScale[i] = archsimd.LoadUint32x16(&v)
	}
}

// rtnBatch16 quantizes the sixteen groups of x (g elements each) into dst and res and returns
// the mask of the groups it did: those whose maximum is finite and whose scale is not zero.
func rtnBatch16(res *rtnBatch, x []float32, dst []byte, g int) uint16 {
	var m [batchGroups]archsimd.Uint32x16
	abs := archsimd.BroadcastUint32x16(0x7fffffff)
	for l := range m {
		xs := x[l*g : (l+1)*g]
		acc := archsimd.BroadcastUint32x16(0)
		for v := 0; v+16 <= len(xs); v += 16 {
			acc = acc.Max(archsimd.LoadFloat32x16((*[16]float32)(xs[v:])).AsUint32x16().And(abs))
		}
		m[l] = acc
	}
	amax := maxTree16(&m)
	finite := amax.AsInt32x16().Less(archsimd.BroadcastInt32x16(0x7f800000))
	sR := roundBF16x16(amax.AsFloat32x16().Div(bc16(7.5)))
	ok := finite.And(sR.NotEqual(bc16(0))).ToBits()
	sR.AsUint32x16().ShiftAllRight(16).TruncateToUint16().Store(&res.scale)

	var e, ss [batchGroups / 2]archsimd.Float32x16
	for i := range batchGroups / 2 {
		e[i], ss[i], res.clip[2*i], res.clip[2*i+1] = rtnPair(x[2*i*g:(2*i+2)*g], dst[i*g:(i+1)*g], g, sR.Permute(rtnPairScale[i]))
	}
	tree8(&e).Store(&res.err)
	tree8(&ss).Store(&res.ss)
	return ok
}

// maxTree16 returns the vector whose lane l is the largest lane of m[l], by maxima of even and
// odd lanes (the order of a maximum does not matter).
func maxTree16(m *[batchGroups]archsimd.Uint32x16) archsimd.Uint32x16 {
	ev, od := rtnEven, rtnOdd
	mx := func(a, b archsimd.Uint32x16) archsimd.Uint32x16 {
		return a.ConcatPermute(b, ev).Max(a.ConcatPermute(b, od))
	}
	b0, b1, b2, b3 := mx(m[0], m[1]), mx(m[2], m[3]), mx(m[4], m[5]), mx(m[6], m[7])
	b4, b5, b6, b7 := mx(m[8], m[9]), mx(m[10], m[11]), mx(m[12], m[13]), mx(m[14], m[15])
	return mx(mx(mx(b0, b1), mx(b2, b3)), mx(mx(b4, b5), mx(b6, b7)))
}

// tree8 reduces eight pair vectors (lanes 0-7 of vector i: group 2i's eight sum lanes, 8-15:
// group 2i+1's) to one lane per group.
func tree8(p *[batchGroups / 2]archsimd.Float32x16) archsimd.Float32x16 {
	a0, a1 := evenOddSum(p[0], p[1]), evenOddSum(p[2], p[3])
	a2, a3 := evenOddSum(p[4], p[5]), evenOddSum(p[6], p[7])
	return evenOddSum(evenOddSum(a0, a1), evenOddSum(a2, a3))
}

// evenOddSum returns the sums of adjacent lanes of a then b: (a0+a1, a2+a3, ..., b14+b15).
func evenOddSum(a, b archsimd.Float32x16) archsimd.Float32x16 {
	return a.ConcatPermute(b, rtnEven).Add(a.ConcatPermute(b, rtnOdd))
}

// rtnPair quantizes two groups (x: group a then group b, g elements each) with the scales s
// (lanes 0-7 group a's, 8-15 group b's) into dst (the two groups' packed bytes) and returns
// their eight-lane error and Σx² sums (lanes 0-7 group a, 8-15 group b) and clip counts.
func rtnPair(x []float32, dst []byte, g int, s archsimd.Float32x16) (e, ss archsimd.Float32x16, _, _ int32) {
	xa, xb := x[:g], x[g:2*g]
	da, db := dst[:g/2], dst[g/2:g]
	lo, hi, words := rtnLo, rtnHi, rtnWords
	var clipA, clipB int
	for v := 0; v+16 <= g; v += 16 {
		va := archsimd.LoadFloat32x16((*[16]float32)(xa[v:]))
		vb := archsimd.LoadFloat32x16((*[16]float32)(xb[v:]))
		n0, e0, s0, c0 := rtnStep(va.ConcatPermute(vb, lo), s)
		n1, e1, s1, c1 := rtnStep(va.ConcatPermute(vb, hi), s)
		e, ss = e.Add(e0).Add(e1), ss.Add(s0).Add(s1)
		if c0|c1 != 0 { // rare; OnesCount8 is a table look-up, not a call (GOAMD64=v1 has no POPCNT)
			clipA += bits.OnesCount8(uint8(c0)) + bits.OnesCount8(uint8(c1))
			clipB += bits.OnesCount8(uint8(c0>>8)) + bits.OnesCount8(uint8(c1>>8))
		}
		// n0 holds word v/8 of a (bytes 0-3) and of b (4-7), n1 word v/8+1: the two words of
		// each group side by side.
		w := n0.AsUint32x4().ConcatPermute(n1.AsUint32x4(), words).AsUint64x2()
		binary.LittleEndian.PutUint64(da[v/2:], w.GetElem(0))
		binary.LittleEndian.PutUint64(db[v/2:], w.GetElem(1))
	}
	return e, ss, int32(clipA), int32(clipB)
}

// rtnWords interleaves the words of two vectors: a0, b0, a1, b1 from a0, a1 and b0, b1.
var rtnWords = archsimd.LoadUint32x4(&[4]uint32{0, 4, 1, 5})

var (
	rtnRne8, rtnHiClip, rtnLoClip = bc16(rne + 8), bc16(7.5), bc16(-8.5)
	rtnMin, rtnMax                = bc16(-8), bc16(7)
	rtnNibble                     = archsimd.BroadcastUint32x16(15)
)

// rtnStep quantizes sixteen elements v with scales s as packDiv does: it returns their eight
// nibbles per eight lanes as the bytes of a word each (Uint8x16 bytes 0-3 from lanes 0-7, 4-7
// from 8-15), their squared errors and squares, and the mask of the lanes whose nearest level
// was clipped.
func rtnStep(v, s archsimd.Float32x16) (nib archsimd.Uint8x16, e, ss archsimd.Float32x16, clip uint16) {
	f := v.Div(s)
	clip = f.GreaterEqual(rtnHiClip).ToBits() | f.Less(rtnLoClip).ToBits() // Or of masks goes through vectors
	r := f.Max(rtnMin).Min(rtnMax).Add(rtnRne8)
	d := v.Sub(r.Sub(rtnRne8).Mul(s))
	n := r.AsUint32x16().And(rtnNibble).AsUint64x8()
	return n.Or(n.ShiftAllRight(28)).TruncateToUint8(), d.Mul(d), v.Mul(v), clip
}
