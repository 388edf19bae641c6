//go:build goexperiment.simd && amd64

package kernels

import (
	"encoding/binary"
	"math/bits"
	"simd/archsimd"
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
		ok, stored := rtnBatch16(&res, src[k0*g:(k0+batchGroups)*g], out.Packed[k0*g/2:(k0+batchGroups)*g/2], g,
			out.Stats[k0:k0+batchGroups], out.Scales[2*k0:2*(k0+batchGroups)])
		if stored {
			if k, err := quantGroupsLeft(out, src, k0, ^ok, p); err != nil {
				return k, err
			}
			continue
		}
		if k, err := storeRTNBatch(out, src, k0, batchGroups, ok, p, &res); err != nil {
			return k, err
		}
	}
	return k0, nil
}

// quantGroupsLeft quantizes with quantGroup the groups k0+l of the lanes l of left, whose
// scales and statistics a batch wrote but could not quantize (non-finite, zero scale),
// overwriting those. On a non-finite value it returns the group's index and the error.
func quantGroupsLeft(out Int4Out, src []float32, k0 int, left uint16, p *Int4Params) (int, error) {
	for ; left != 0; left &= left - 1 {
		k := k0 + bits.TrailingZeros16(left)
		if err := quantGroupAt(out, src, k, p); err != nil {
			return k, err
		}
	}
	return 0, nil
}

// storeRTNBatch writes the scales and statistics of the nb groups from k0 on that an RTN batch
// did (the lanes of ok, their bytes already written) and quantizes the others with quantGroup.
// On a non-finite value it returns the group's index and the error.
func storeRTNBatch(out Int4Out, src []float32, k0, nb int, ok uint16, p *Int4Params, res *rtnBatch) (int, error) {
	sc := out.Scales[2*k0 : 2*(k0+nb)]
	for l := range nb {
		k := k0 + l
		if ok>>l&1 != 0 {
			out.Stats[k] = GroupStats{SumSq: res.ss[l], Err: res.err[l], RTNErr: res.err[l], Clipped: res.clip[l]}
			binary.LittleEndian.PutUint16(sc[2*l:], res.scale[l])
			continue
		}
		if err := quantGroupAt(out, src, k, p); err != nil {
			return k, err
		}
	}
	return 0, nil
}

// rtnBatch holds the results of sixteen groups, and the scales and pair sums rtnPairsAsm
// works with.
type rtnBatch struct {
	err, ss [batchGroups]float32
	clip    [batchGroups]int32
	scale   [batchGroups]uint16 // BF16 codes
	scales  [batchGroups]float32
	pairs   rtnPairsOut
}

// The permutes of the RTN batch: lanes 0-7 of two vectors, lanes 8-15 of two vectors, the even
// and the odd lanes of two vectors, and for pair i the scales of groups 2i and 2i+1 (set by
// initRTNVectors, from initAVX512Vectors).
var (
	rtnLo, rtnHi, rtnEven, rtnOdd archsimd.Uint32x16
	rtnPairScale                  [batchGroups / 2]archsimd.Uint32x16
)

func initRTNVectors() {
	// The indices first (scalar code), then the vectors, then VZEROUPPER.
	var lo, hi, even, odd [16]uint32
	var v [len(rtnPairScale)][16]uint32
	for p := range 16 {
		lo[p] = uint32(p%8 + 16*(p/8))
		hi[p] = lo[p] + 8
		even[p], odd[p] = uint32(2*p), uint32(2*p+1)
	}
	for i := range v {
		for p := range v[i] {
			v[i][p] = uint32(2*i + p/8)
		}
	}
	rtnRne8, rtnHiClip, rtnLoClip = bc16(rne+8), bc16(7.5), bc16(-8.5)
	rtnMin, rtnMax = bc16(-8), bc16(7)
	rtnLo, rtnHi = archsimd.LoadUint32x16(&lo), archsimd.LoadUint32x16(&hi)
	rtnPackK = archsimd.BroadcastUint32x16(rtnPackXor)
	rtnPackIdx = archsimd.LoadInt8x32(&rtnPackShuffle)
	rtnEven, rtnOdd = archsimd.LoadUint32x16(&even), archsimd.LoadUint32x16(&odd)
	for i := range v {
		rtnPairScale[i] = archsimd.LoadUint32x16(&v[i])
	}
	archsimd.ClearAVXUpperBits()
}

// rtnBatch16 quantizes the sixteen groups of x (g elements each) into dst and res and returns
// the mask of the groups it did: those whose maximum is finite and whose scale is not zero.
// When the assembly pass applies (stored) it writes every group's scale and statistics to
// scaleOut and stats (sixteen each) instead of res; those of the groups outside ok are then
// the caller's to overwrite.
func rtnBatch16(res *rtnBatch, x []float32, dst []byte, g int, stats []GroupStats, scaleOut []byte) (ok uint16, stored bool) {
	var clips [batchGroups / 2][2]int // zeroed here, before the vector code
	_, _ = x[16*g-1], dst[8*g-1]
	ok, full := rtnScalesAsm(&x[0], g, &res.scale, &res.scales)
	if !full && g%32 == 0 && g <= maxRTNAsmGroup {
		_, _ = stats[batchGroups-1], scaleOut[2*batchGroups-1]
		rtnPairsAsm(&x[0], &dst[0], g, &res.scales, &res.pairs, &stats[0], &res.scale, &scaleOut[0])
		return ok, true
	}
	sR := archsimd.LoadFloat32x16(&res.scales)
	pair := func(i int) (e, ss archsimd.Float32x16) {
		return rtnPair(x[2*i*g:(2*i+2)*g], dst[i*g:(i+1)*g], g, sR.Permute(rtnPairScale[i]), full, &clips[i])
	}
	e0, s0 := pair(0)
	e1, s1 := pair(1)
	e01, s01 := evenOddSum(e0, e1), evenOddSum(s0, s1)
	e2, s2 := pair(2)
	e3, s3 := pair(3)
	e0123, s0123 := evenOddSum(e01, evenOddSum(e2, e3)), evenOddSum(s01, evenOddSum(s2, s3))
	e4, s4 := pair(4)
	e5, s5 := pair(5)
	e45, s45 := evenOddSum(e4, e5), evenOddSum(s4, s5)
	e6, s6 := pair(6)
	e7, s7 := pair(7)
	e4567, s4567 := evenOddSum(e45, evenOddSum(e6, e7)), evenOddSum(s45, evenOddSum(s6, s7))
	evenOddSum(e0123, e4567).Store(&res.err)
	evenOddSum(s0123, s4567).Store(&res.ss)
	archsimd.ClearAVXUpperBits()
	for i, c := range clips {
		res.clip[2*i], res.clip[2*i+1] = int32(c[0]), int32(c[1])
	}
	return ok, false
}

// evenOddSum returns the sums of adjacent lanes of a then b: (a0+a1, a2+a3, ..., b14+b15).
func evenOddSum(a, b archsimd.Float32x16) archsimd.Float32x16 {
	return a.ConcatPermute(b, rtnEven).Add(a.ConcatPermute(b, rtnOdd))
}

// rtnPair quantizes two groups (x: group a then group b, g elements each) with the scales s
// (lanes 0-7 group a's, 8-15 group b's) into dst (the two groups' packed bytes) and returns
// their eight-lane error and Σx² sums (lanes 0-7 group a, 8-15 group b) and clip counts. full
// is false when both scales are normal float32 values: then |x/s| < 7.53 (s is absmax/7.5
// rounded twice, each time by a relative 2^-8 at most, and |x| ≤ absmax), so the clamp at -8
// and the clip test x/s < -8.5 never act and are left out.
//
// The clip counts go to clip (group a's, b's), zero on entry: rtnBatch16 zeroes them before its
// vector code, where zeroing costs no AVX-SSE transition.
func rtnPair(x []float32, dst []byte, g int, s archsimd.Float32x16, full bool, clip *[2]int) (e, ss archsimd.Float32x16) {
	xa, xb := x[:g], x[g:2*g]
	da, db := dst[:g/2], dst[g/2:g]
	lo, hi := rtnLo, rtnHi
	if g == 32 {
		var w archsimd.Uint8x32
		e, ss, w = rtnQuad((*[32]float32)(xa), (*[32]float32)(xb), s, full, e, ss, clip)
		w.Store((*[32]uint8)(dst)) // a's sixteen bytes, then b's
		return e, ss
	}
	v := 0
	for ; v+32 <= g; v += 32 {
		var w archsimd.Uint8x32
		e, ss, w = rtnQuad((*[32]float32)(xa[v:]), (*[32]float32)(xb[v:]), s, full, e, ss, clip)
		w.GetLo().Store((*[16]uint8)(da[v/2:]))
		w.GetHi().Store((*[16]uint8)(db[v/2:]))
	}
	if v < g { // sixteen elements left (g is a multiple of 16)
		va := archsimd.LoadFloat32x16((*[16]float32)(xa[v:]))
		vb := archsimd.LoadFloat32x16((*[16]float32)(xb[v:]))
		r0, e0, s0, c0 := rtnStep(va.ConcatPermute(vb, lo), s, full)
		r1, e1, s1, c1 := rtnStep(va.ConcatPermute(vb, hi), s, full)
		e, ss = e.Add(e0).Add(e1), ss.Add(s0).Add(s1)
		if c0|c1 != 0 {
			countClips(clip, c0)
			countClips(clip, c1)
		}
		// The low byte of each lane of r0 and r1 is its nibble: one byte per element, then two
		// nibbles per byte; that gives word v/8 of a, of b, word v/8+1 of a, of b, in that order.
		// (y's lanes are below 2^15: the arithmetic shift is the logical one.)
		y := archsimd.Uint8x32{}.SetLo(r0.TruncateToUint8()).SetHi(r1.TruncateToUint8()).AsUint16x16()
		w := y.Or(y.AsInt16x16().ShiftAllRight(4).AsUint16x16()).TruncateToUint8().AsUint32x4().PermuteScalars(0, 2, 1, 3).AsUint64x2()
		binary.LittleEndian.PutUint64(da[v/2:], w.GetElem(0))
		binary.LittleEndian.PutUint64(db[v/2:], w.GetElem(1))
	}
	return e, ss
}

// countClips adds the clip mask c of a step (lanes 0-7 group a, 8-15 group b) to clip. It is
// rarely called: OnesCount8 is a table look-up, not a call (GOAMD64=v1 has no POPCNT).
func countClips(clip *[2]int, c uint16) {
	clip[0] += bits.OnesCount8(uint8(c))
	clip[1] += bits.OnesCount8(uint8(c >> 8))
}

// rtnQuad quantizes elements 0-31 of groups a and b as rtnPair does, adds their errors and
// squares to e and ss and their clips to clip, and returns the sums and the packed bytes (a's
// sixteen, then b's). The four steps run one after the other, each folded into the sums and
// the packed word at once, so that no more than one step's vectors are live (Go allocates 15
// of them).
func rtnQuad(a, b *[32]float32, s archsimd.Float32x16, full bool, e, ss archsimd.Float32x16, clip *[2]int) (_, _ archsimd.Float32x16, _ archsimd.Uint8x32) {
	va, vb := archsimd.LoadFloat32x16((*[16]float32)(a[:16])), archsimd.LoadFloat32x16((*[16]float32)(b[:16]))
	r, e0, s0, c := rtnStep(va.ConcatPermute(vb, rtnLo), s, full)
	e, ss = e.Add(e0), ss.Add(s0)
	if c != 0 {
		countClips(clip, c)
	}
	w := r.Xor(rtnPackK)
	r, e0, s0, c = rtnStep(va.ConcatPermute(vb, rtnHi), s, full)
	e, ss = e.Add(e0), ss.Add(s0)
	if c != 0 {
		countClips(clip, c)
	}
	w = w.Xor(r.ShiftAllLeft(8))
	va, vb = archsimd.LoadFloat32x16((*[16]float32)(a[16:])), archsimd.LoadFloat32x16((*[16]float32)(b[16:]))
	r, e0, s0, c = rtnStep(va.ConcatPermute(vb, rtnLo), s, full)
	e, ss = e.Add(e0), ss.Add(s0)
	if c != 0 {
		countClips(clip, c)
	}
	w = w.Xor(r.ShiftAllLeft(16))
	r, e0, s0, c = rtnStep(va.ConcatPermute(vb, rtnHi), s, full)
	e, ss = e.Add(e0), ss.Add(s0)
	if c != 0 {
		countClips(clip, c)
	}
	return e, ss, packNibbles32(w.Xor(r.ShiftAllLeft(24)))
}

// packNibbles32 packs the nibbles of rtnStep's results for 32 elements of groups a and b into
// a's sixteen bytes, then b's, from w = r0 ^ r1<<8 ^ r2<<16 ^ r3<<24 ^ rtnPackK (r0: elements
// 0-7 of a, then 0-7 of b; r1: 8-15; r2: 16-23; r3: 24-31). Each lane of an r is 0x4b400000
// plus its nibble n, so the shifts and xors leave in every lane the constant rtnPackK and the
// bytes n(r0), n(r1), n(r2), n(r3), and xor-ing rtnPackK clears the rest. Or-ing each 64-bit
// lane with itself shifted right by 28 puts the odd lane's nibbles in the high halves of the
// even lane's bytes: byte i of 64-bit lane k is then byte k%4 of word i of a (k < 4) or b, and
// a byte shuffle within each 128-bit half moves it to byte 4i+k%4. In all, per 32 elements:
// four xors, three shifts of 32-bit lanes, a shift and an or of 64-bit lanes, a truncation and
// a shuffle, where one byte per element and 16-bit steps took six truncations, four inserts,
// two shuffles and four moves to general registers.
func packNibbles32(w archsimd.Uint32x16) archsimd.Uint8x32 {
	q := w.AsUint64x8() // below 2^63: the arithmetic shift is the logical one
	return q.Or(q.AsInt64x8().ShiftAllRight(28).AsUint64x8()).TruncateToUint32().AsUint8x32().PermuteOrZeroGrouped(rtnPackIdx)
}

// rtnPackXor is what four shifted rtnStep results leave in each lane besides their nibbles
// (packNibbles32): 0x4b400000, the bits of 1.5·2^23+8 above the nibble, xor-ed with itself
// shifted left by 8, 16 and 24, in 32 bits. rtnPackShuffle moves byte 4k+i of each 16 bytes
// to byte 4i+k, twice (both halves of a 256-bit vector).
const rtnPackXor = (0x4b400000 ^ 0x4b400000<<8 ^ 0x4b400000<<16 ^ 0x4b400000<<24) & 0xffffffff

var rtnPackShuffle = [32]int8{
	0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
	0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
}

// rtnPackK and rtnPackIdx are rtnPackXor and rtnPackShuffle in vectors (initRTNVectors).
var (
	rtnPackK   archsimd.Uint32x16
	rtnPackIdx archsimd.Int8x32
)

var rtnRne8, rtnHiClip, rtnLoClip, rtnMin, rtnMax archsimd.Float32x16 // initRTNVectors

// rtnStep quantizes sixteen elements v with scales s as packDiv does: it returns the rounded
// values (v/s clamped, plus 1.5·2^23+8), whose low byte is the nibble, the squared errors and
// the squares, and the mask of the lanes whose nearest level was clipped. full: see rtnPair.
func rtnStep(v, s archsimd.Float32x16, full bool) (r archsimd.Uint32x16, e, ss archsimd.Float32x16, clip uint16) {
	f := v.Div(s)
	clip = f.GreaterEqual(rtnHiClip).ToBits() // Or of masks would go through vectors
	if full {
		clip |= f.Less(rtnLoClip).ToBits()
		f = f.Max(rtnMin)
	}
	rf := f.Min(rtnMax).Add(rtnRne8)
	d := v.Sub(rf.Sub(rtnRne8).Mul(s))
	return rf.AsUint32x16(), d.Mul(d), v.Mul(v), clip
}
