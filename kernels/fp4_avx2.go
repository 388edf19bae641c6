//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"math/bits"
	"simd/archsimd"
)

// The FP4 groups on AVX2, in 256-bit vectors: an NVFP4 group is two Float32x8 (elements 0-7 and
// 8-15), an MXFP4 group four, so vector lane j is the specification's lane j and its elements
// add in element order, then the tree of fp4_simd.go. The element steps are those of
// fp4Values16 with signed compares (the magnitudes are below 2^31) and without the AVX-512
// byte truncations: codes are packed from a stored vector with integer operations.

func fp4Group16AVX2(dst []byte, x *[16]float32, c *fp4Cand, r *fp4Res) {
	xa := archsimd.LoadFloat32x8((*[8]float32)(x[:8]))
	xb := archsimd.LoadFloat32x8((*[8]float32)(x[8:]))
	best, e0, eb := 0, uint32(0), uint32(0)
	if c.n > 1 {
		for i := range c.n {
			s := archsimd.BroadcastFloat32x8(c.s[i])
			qa, _, _, _ := fp4Values8(xa, s)
			qb, _, _, _ := fp4Values8(xb, s)
			da, db := xa.Sub(qa), xb.Sub(qb)
			e := fold8(da.Mul(da).Add(db.Mul(db)))
			if i == 0 {
				e0, eb = e, e
			} else if e < eb {
				best, eb = i, e
			}
		}
	}
	s := archsimd.BroadcastFloat32x8(c.s[best])
	qa, va, sa, aa := fp4Values8(xa, s)
	qb, vb, sb, ab := fp4Values8(xb, s)
	da, db := xa.Sub(qa), xb.Sub(qb)
	r.err = fold8(da.Mul(da).Add(db.Mul(db)))
	if c.n == 1 {
		e0 = r.err
	}
	r.best, r.rtn = best, e0
	r.ss = fold8(xa.Mul(xa).Add(xb.Mul(xb)))
	r.clip = int32(fp4Clips8(aa) + fp4Clips8(ab))
	binary.LittleEndian.PutUint32(dst, pack8(fp4Codes8(va, sa)))
	binary.LittleEndian.PutUint32(dst[4:], pack8(fp4Codes8(vb, sb)))
}

func fp4Group32AVX2(dst []byte, x *[32]float32, c *fp4Cand, r *fp4Res) {
	x0 := archsimd.LoadFloat32x8((*[8]float32)(x[:8]))
	x1 := archsimd.LoadFloat32x8((*[8]float32)(x[8:16]))
	x2 := archsimd.LoadFloat32x8((*[8]float32)(x[16:24]))
	x3 := archsimd.LoadFloat32x8((*[8]float32)(x[24:]))
	sq := func(s archsimd.Float32x8) (e archsimd.Float32x8) {
		q0, _, _, _ := fp4Values8(x0, s)
		q1, _, _, _ := fp4Values8(x1, s)
		q2, _, _, _ := fp4Values8(x2, s)
		q3, _, _, _ := fp4Values8(x3, s)
		d0, d1, d2, d3 := x0.Sub(q0), x1.Sub(q1), x2.Sub(q2), x3.Sub(q3)
		return d0.Mul(d0).Add(d1.Mul(d1)).Add(d2.Mul(d2)).Add(d3.Mul(d3))
	}
	best, e0, eb := 0, uint32(0), uint32(0)
	if c.n > 1 {
		for i := range c.n {
			e := fold8(sq(archsimd.BroadcastFloat32x8(c.s[i])))
			if i == 0 {
				e0, eb = e, e
			} else if e < eb {
				best, eb = i, e
			}
		}
	}
	s := archsimd.BroadcastFloat32x8(c.s[best])
	r.err = fold8(sq(s))
	if c.n == 1 {
		e0 = r.err
	}
	r.best, r.rtn = best, e0
	r.ss = fold8(x0.Mul(x0).Add(x1.Mul(x1)).Add(x2.Mul(x2)).Add(x3.Mul(x3)))
	_, v0, s0, a0 := fp4Values8(x0, s)
	_, v1, s1, a1 := fp4Values8(x1, s)
	_, v2, s2, a2 := fp4Values8(x2, s)
	_, v3, s3, a3 := fp4Values8(x3, s)
	r.clip = int32(fp4Clips8(a0) + fp4Clips8(a1) + fp4Clips8(a2) + fp4Clips8(a3))
	binary.LittleEndian.PutUint32(dst, pack8(fp4Codes8(v0, s0)))
	binary.LittleEndian.PutUint32(dst[4:], pack8(fp4Codes8(v1, s1)))
	binary.LittleEndian.PutUint32(dst[8:], pack8(fp4Codes8(v2, s2)))
	binary.LittleEndian.PutUint32(dst[12:], pack8(fp4Codes8(v3, s3)))
}

// fp4Values8 is fp4Values16 for eight lanes.
func fp4Values8(x, s archsimd.Float32x8) (q archsimd.Float32x8, v, sign, a archsimd.Uint32x8) {
	u := func(c uint32) archsimd.Uint32x8 { return archsimd.BroadcastUint32x8(c) }
	r := x.Div(s).AsUint32x8()
	sign = r.And(u(0x80000000))
	a = r.And(u(0x7fffffff))
	a = a.Add(u(0x7fff)).Add(a.ShiftRight(u(16)).And(u(1))).And(u(0xffff0000))
	small := archsimd.BroadcastInt32x8(0x3f800000).Greater(a.AsInt32x8())
	m := archsimd.BroadcastFloat32x8(0x1p22)
	vs := a.AsFloat32x8().Add(m).Sub(m).AsUint32x8()
	vl := a.Add(u(0x1fffff)).Add(a.ShiftRight(u(22)).And(u(1))).And(u(0xffc00000)).Min(u(0x40c00000))
	v = vs.Merge(vl, small)
	q = v.Or(sign).AsFloat32x8().Mul(s)
	return q, v, sign, a
}

// fp4Clips8 counts the lanes whose BF16-rounded |ratio| a exceeds 6.
func fp4Clips8(a archsimd.Uint32x8) int {
	return bits.OnesCount8(a.AsInt32x8().Greater(archsimd.BroadcastInt32x8(0x40c00000)).ToBits())
}

// fp4Codes8 is fp4Codes16 for eight lanes.
func fp4Codes8(v, sign archsimd.Uint32x8) archsimd.Uint32x8 {
	u := func(c uint32) archsimd.Uint32x8 { return archsimd.BroadcastUint32x8(c) }
	idx := v.ShiftRight(u(22)).AsInt32x8().Sub(archsimd.BroadcastInt32x8(0xfc)).Max(archsimd.BroadcastInt32x8(0)).AsUint32x8()
	idx = idx.Add(u(1).Masked(v.Equal(u(0x3f000000))))
	return idx.Or(sign.ShiftRight(u(28)))
}

// pack8 returns eight codes (one per lane) as four bytes, the lower lane in the low nibble,
// little-endian: the lanes shifted to their nibble (VPSLLVD), the halves ORed, and the four
// words extracted (VPEXTRD) and ORed, with no store through memory (the zeroing of a stack
// array would be a legacy-SSE MOVUPS between the vector instructions).
func pack8(c archsimd.Uint32x8) uint32 {
	v := c.ShiftLeft(archsimd.LoadUint32x8(&fp4NibblePos))
	h := v.GetLo().Or(v.GetHi())
	return h.GetElem(0) | h.GetElem(1) | h.GetElem(2) | h.GetElem(3)
}

// fp4NibblePos is the bit position of each of eight codes in a packed 32-bit word.
var fp4NibblePos = [8]uint32{0, 4, 8, 12, 16, 20, 24, 28}

// expandFP4AVX2 is expandFP4Range eight values per vector: the codes of a 32-bit word shifted
// into lanes (VPSRLVD), their magnitudes permuted from the eight grid values (the permute reads
// the low three bits) and the sign bit moved in from bit 3, times the group's scale.
func expandFP4AVX2(dst []float32, p []byte, scales []float32, i0, g int) {
	table := archsimd.LoadFloat32x8((*[8]float32)(e2m1Values[:8]))
	shr := archsimd.LoadUint32x8(&fp4NibblePos)
	signBit := archsimd.BroadcastUint32x8(8)
	for i := 0; i+8 <= len(dst); i += 8 {
		c := archsimd.BroadcastUint32x8(binary.LittleEndian.Uint32(p[i/2:])).ShiftRight(shr)
		v := table.Permute(c).AsUint32x8().Or(c.And(signBit).ShiftAllLeft(28)).AsFloat32x8()
		v.Mul(archsimd.BroadcastFloat32x8(scales[(i0+i)/g])).Store((*[8]float32)(dst[i:]))
	}
}
