//go:build goexperiment.simd && amd64

package kernels

import (
	"math/bits"
	"simd/archsimd"
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
	s.blockAbsMax = blockAbsMaxAVX512
	s.encodeE4M3Row = encodeE4M3RowAVX512
	s.decodeE4M3 = decodeE4M3AVX512
	s.gemmTile = gemmTileAVX512A
	s.axpy = axpyAVX512
	return s
}()

var _ = func() bool {
	if archsimd.X86.AVX512() {
		initAVX512Vectors()
		addLoops(&avx512Loops)
	}
	return true
}()

// initAVX512Vectors sets the package's 512-bit constant vectors. They are declared without an
// initialiser because one would run in the package's initialisation with AVX-512 instructions,
// and stop the program on a CPU without them.
func initAVX512Vectors() {
	absMask64x8 = archsimd.BroadcastUint64x8(0x7fffffffffffffff)
	bf16Round, bf16One, bf16Keep = bcu16(0x7fff), bcu16(1), bcu16(0xffff0000)
	negOne64x8 = archsimd.BroadcastFloat64x8(-1)
	nibbleShifts64 = archsimd.LoadUint64x8(&nibbleShifts64Arr)
	archsimd.ClearAVXUpperBits()
	initRTNVectors()
	initSearch16Vectors()
}

func bc16(v float32) archsimd.Float32x16 { return archsimd.BroadcastFloat32x16(v) }

// errMulBatchAVX512 evaluates four candidates per pass over x (two per Float32x16), then
// reduces the four eight-lane sums together: three horizontal adds give, for each candidate,
// ((l0+l1)+(l2+l3)) and ((l4+l5)+(l6+l7)), whose sum is the specification's order.
func errMulBatchAVX512(x, s, errs []float32) {
	errs = errs[:len(s)]
	i := 0
	for ; i+4 <= len(s); i += 4 {
		err4(x, (*[4]float32)(s[i:])).StoreSlice(errs[i : i+4])
	}
	archsimd.ClearAVXUpperBits()
	if r := len(s) - i; r > 0 {
		// The last one to three candidates, padded by repeating the last one.
		var c, e [4]float32
		for j := range c {
			c[j] = s[i+min(j, r-1)]
		}
		err4(x, &c).Store(&e)
		archsimd.ClearAVXUpperBits()
		copy(errs[i:], e[:r])
	}
}

// err4 returns errMul(x, c, 1/c) for four candidates c; 1/c is a vector division (the same
// IEEE quotients as the scalar one).
func err4(x []float32, c *[4]float32) archsimd.Float32x4 {
	lo, hi, r, one := bc16(-8), bc16(7), bc16(rne), bc16(1)
	vsA := archsimd.Float32x16{}.SetLo(bcAt(&c[0])).SetHi(bcAt(&c[1]))
	vsB := archsimd.Float32x16{}.SetLo(bcAt(&c[2])).SetHi(bcAt(&c[3]))
	viA, viB := one.Div(vsA), one.Div(vsB)
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

var absMask64x8 archsimd.Uint64x8 // |x| of float64 lanes (initAVX512Vectors)

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
	archsimd.ClearAVXUpperBits()
	return dst[:out]
}

var (
	bf16Round, bf16One, bf16Keep archsimd.Uint32x16 // initAVX512Vectors
)

// roundBF16x16 is floatcodec.RoundBF16 for finite values: b + 0x7fff + (b>>16)&1, truncated.
func roundBF16x16(v archsimd.Float32x16) archsimd.Float32x16 {
	b := v.AsUint32x16()
	return b.Add(bf16Round).Add(sra16(b, 16).And(bf16One)).And(bf16Keep).AsFloat32x16()
}

func bcu16(v uint32) archsimd.Uint32x16 { return archsimd.BroadcastUint32x16(v) }

// encodeE4M3AVX512 is encodeE4M3Scalar sixteen at a time: the IEEE division, then the cases
// of e4m3 on the bit pattern a of |x/s|: normal (round to nearest even at bit 20, the exponent
// rebased by 120 in the same addition), subnormal (through the float32 rounding trick, whose
// low byte is the code) and, rare in a block whose scale is its maximum/448, saturated or NaN.
// The subnormal and saturated cases are computed only for the vectors that have one.
func encodeE4M3AVX512(codes []byte, src []float32, s float32) {
	codes = codes[:len(src)]
	// The scalar tail first, while the upper halves are clean.
	t := len(src) &^ 15
	encodeE4M3Scalar(codes[t:], src[t:], s)
	codes, src = codes[:t], src[:t]
	vs := bc16(s)
	// The constants live in registers for the loop (broadcasts in the loop are redone each time).
	c80, c7fff, one, round := bcu16(0x80), bcu16(0x7fffffff), bcu16(1), bcu16(1<<32+0x7ffff-120<<23) // the rounding bias, less the rebasing (mod 2^32)
	f512, frne := bc16(512), bc16(rne)
	minNormal, satur := archsimd.BroadcastInt32x16(0x3c800000), archsimd.BroadcastInt32x16(0x43e00000)
	for len(src) >= 16 {
		b := archsimd.LoadFloat32x16((*[16]float32)(src)).Div(vs).AsUint32x16()
		a := b.And(c7fff)
		code := sra16(a.Add(round).Add(sra16(a, 20).And(one)), 20)
		ai := a.AsInt32x16()
		if sub := ai.Less(minNormal); sub.ToBits() != 0 {
			code = a.AsFloat32x16().Mul(f512).Add(frne).AsUint32x16().Merge(code, sub)
		}
		if big := ai.GreaterEqual(satur); big.ToBits() != 0 {
			code = e4m3Big(ai).Merge(code, big)
		}
		code.Or(sra16(b, 24).And(c80)).TruncateToUint8().StoreSlice(codes)
		src, codes = src[16:], codes[16:]
	}
	archsimd.ClearAVXUpperBits()
}

// decodeE4M3AVX512 is decodeE4M3AVX2 sixteen codes at a time.
func decodeE4M3AVX512(dst []float32, codes []byte, s float32) {
	dst = dst[:len(codes)]
	// The scalar tail first, while the upper halves are clean.
	t := len(codes) &^ 15
	decodeE4M3Scalar(dst[t:], codes[t:], s)
	dst, codes = dst[:t], codes[:t]
	vs, p120 := bc16(s), bc16(0x1p120)
	m7f, nan := bcu16(0x7f), bcu16(0x7fc00000)
	for len(codes) >= 16 {
		c := archsimd.LoadUint8x16((*[16]byte)(codes)).ExtendToUint32()
		mag := c.And(m7f)
		f := mag.ShiftAllLeft(20).AsFloat32x16().Mul(p120).AsUint32x16().Or(sra16(c, 7).ShiftAllLeft(31))
		nan.Merge(f, mag.Equal(m7f)).AsFloat32x16().Mul(vs).Store((*[16]float32)(dst))
		codes, dst = codes[16:], dst[16:]
	}
	archsimd.ClearAVXUpperBits()
}

// e4m3Big returns the codes of |v| ≥ 448 (bit patterns ai): 0x7e, or 0x7f for NaN.
func e4m3Big(ai archsimd.Int32x16) archsimd.Uint32x16 {
	return bcu16(0x7e).Merge(bcu16(0x7f), ai.LessEqual(archsimd.BroadcastInt32x16(0x7f800000)))
}

// errLanesFP8AVX512 is ErrorSumsFP8Block's loop: the codes of the slab are decoded in order
// (block scale by block scale, across row ends, as the slab is one slice) into a stack buffer
// and the sums run over it 512 elements at a time, the lanes held in one sums512 for the whole
// slab. (Decoding straight into the sums, eight codes a step, measured as fast alone but 0.5
// ns/weight slower right after QuantizeFP8Block, as convert calls it:
// BenchmarkKernelParts/fp8-block-both.)
func errLanesFP8AVX512(a *errAcc, ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) {
	if a.n&7 != 0 {
		errLanesFP8(a, ref, codes, scale, rows, cols, bh, bw)
		return
	}
	sc := ceilDiv(cols, bw)
	var buf [512 + 256]float32
	var s sums512
	loaded := false
	n := 0 // values in buf
	for r := range rows {
		srow := scale[(r/bh)*sc : (r/bh+1)*sc]
		c := codes[r*cols : (r+1)*cols]
		for bj := 0; bj*bw < cols; bj++ {
			for b0, b1 := bj*bw, min(cols, (bj+1)*bw); b0 < b1; {
				m := min(b1-b0, len(buf)-n)
				decodeE4M3AVX512(buf[n:n+m], c[b0:b0+m], srow[bj])
				n, b0 = n+m, b0+m
				if n >= 512 {
					k := n &^ 7
					loaded = a.bufSums(&s, loaded, ref[:k], buf[:k])
					ref = ref[k:]
					n = copy(buf[:], buf[k:n])
				}
			}
		}
	}
	k := n &^ 7
	if a.bufSums(&s, loaded, ref[:k], buf[:k]) {
		a.save512(&s)
	}
	archsimd.ClearAVXUpperBits()
	for i := k; i < n; i++ {
		a.add(ref[i], buf[i])
	}
}

// bufSums adds ref against got (a multiple of eight elements, a on a lane boundary) to s, the
// first eight elements of all through the scalar step, and reports whether s holds a's lanes.
func (a *errAcc) bufSums(s *sums512, loaded bool, ref, got []float32) bool {
	if !loaded {
		h := a.scalarHead(ref, got)
		ref, got = ref[h:], got[h:]
		if a.n < 8 {
			return false
		}
		a.load512(s)
	}
	for c := 0; c < len(ref); c += maxChunk {
		m := min(len(ref)-c, maxChunk)
		s.pairsChunk(ref[c:c+m], got[c:c+m])
		a.endChunk(s, m)
	}
	archsimd.ClearAVXUpperBits()
	return true
}
