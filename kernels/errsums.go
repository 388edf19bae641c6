package kernels

import "math"

// The error sums of a slice (ErrorSums and its fused forms) use eight float64 lanes, like the
// group sums use eight float32 lanes: element i of the slice goes to lane i%8, each lane adds its
// elements in index order, and the lanes combine as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Every
// term is exact in float64 (products of two float32 values, or the float64 difference of two)
// before it is added. The largest |got-ref| and the first index reaching it do not depend on
// the order.

// errAcc holds the eight lanes of the error sums of one slice.
type errAcc struct {
	sumSqRef, sumSqErr, sumAbsErr, dot, sumSqGot [8]float64
	maxAbs                                       [8]float64
	maxIdx                                       [8]int64 // -1 while the lane is empty
	n                                            int64    // elements added; the next goes to lane n%8
}

func newErrAcc() errAcc {
	a := errAcc{}
	for l := range a.maxIdx {
		a.maxIdx[l] = -1
	}
	return a
}

func lanes64(l *[8]float64) float64 {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

// result combines the lanes; indices are reported relative to base.
func (a *errAcc) result(base int64) ErrSums {
	s := ErrSums{
		N: a.n, SumSqRef: lanes64(&a.sumSqRef), SumSqErr: lanes64(&a.sumSqErr), SumAbsErr: lanes64(&a.sumAbsErr),
		Dot: lanes64(&a.dot), SumSqGot: lanes64(&a.sumSqGot), MaxAbsIdx: -1,
	}
	for l, i := range a.maxIdx {
		if i < 0 {
			continue
		}
		if m := a.maxAbs[l]; s.MaxAbsIdx < 0 || m > s.MaxAbsErr || m == s.MaxAbsErr && base+i < s.MaxAbsIdx {
			s.MaxAbsErr, s.MaxAbsIdx = m, base+i
		}
	}
	return s
}

// add adds one element: the scalar step every loop set reproduces.
func (a *errAcc) add(rf, gf float32) {
	l := a.n & 7
	r, g := float64(rf), float64(gf)
	e := g - r
	ab := math.Abs(e)
	a.sumSqRef[l] += float64(r * r)
	a.sumSqErr[l] += float64(e * e)
	a.sumAbsErr[l] += ab
	a.dot[l] += float64(r * g)
	a.sumSqGot[l] += float64(g * g)
	if ab > a.maxAbs[l] || a.maxIdx[l] < 0 {
		a.maxAbs[l], a.maxIdx[l] = ab, a.n
	}
	a.n++
}

func errLanesScalar(a *errAcc, ref, got []float32) {
	got = got[:len(ref)]
	for i, r := range ref {
		a.add(r, got[i])
	}
}

// errLanesInt4Scalar is errLanes of ref against DequantizeInt4's values, expanded a few words
// at a time into a stack buffer.
func errLanesInt4Scalar(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	var buf [256]float32
	for k, s := range scales {
		lut := int4LUT(s)
		x, p := ref[k*g:(k+1)*g], packed[k*g/2:(k+1)*g/2]
		for len(x) > 0 {
			n := min(len(x), len(buf))
			expandInt4(buf[:n], p[:n/2], &lut)
			errLanesScalar(a, x[:n], buf[:n])
			x, p = x[n:], p[n/2:]
		}
	}
}

// ErrorSums implements Backend, in the eight-lane order above.
func (CPU) ErrorSums(ref, got []float32, base int64) ErrSums {
	a := newErrAcc()
	callErrLanes(&a, ref, got[:len(ref)])
	return a.result(base)
}

// ErrorSumsInt4 returns ErrorSums(ref, got, base) for got the dequantization of packed INT4
// levels with float32 group scales (as DequantizeInt4 writes it), without materialising got.
func (CPU) ErrorSumsInt4(ref []float32, packed []byte, scales []float32, rows, cols, groupSize int, base int64) (ErrSums, error) {
	var e ErrAccumulator
	if err := e.AddInt4(ref, packed, scales, rows, cols, groupSize); err != nil {
		return ErrSums{}, err
	}
	return e.Result(base), nil
}

// ErrorSumsFP8Block returns ErrorSums(ref, got, base) for got the FP8 block dequantization of
// codes (as DequantizeFP8Block writes it), decoding one block row segment at a time.
func (CPU) ErrorSumsFP8Block(ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int, base int64) (ErrSums, error) {
	var e ErrAccumulator
	if err := e.AddFP8Block(ref, codes, scale, rows, cols, bh, bw); err != nil {
		return ErrSums{}, err
	}
	return e.Result(base), nil
}

// ErrAccumulator adds the error sums of consecutive pieces of one slice, piece after piece, in
// the order ErrorSums uses: the result equals that of ErrorSums (ErrorSumsInt4,
// ErrorSumsFP8Block) over their concatenation, bit for bit, whatever the cut. A caller
// quantizing a slab chunk by chunk measures each chunk while it is in cache. The zero value is
// empty.
type ErrAccumulator struct {
	a   errAcc
	set bool
}

// AddInt4 adds the error sums of ref (rows×cols) against the dequantization of packed INT4
// levels with float32 group scales, as ErrorSumsInt4 takes them.
func (e *ErrAccumulator) AddInt4(ref []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	g := groupSize
	if err := checkInt4("reference", len(ref), len(packed), len(scales), rows, cols, g); err != nil {
		return err
	}
	e.start()
	callErrLanesInt4(&e.a, ref, packed, scales, g)
	return nil
}

// Add adds the error sums of ref against got, as ErrorSums takes them. It panics when got is
// shorter than ref.
func (e *ErrAccumulator) Add(ref, got []float32) {
	e.start()
	callErrLanes(&e.a, ref, got[:len(ref)])
}

// AddFP8Block adds the error sums of ref (rows×cols, starting on a block row) against the FP8
// block dequantization of codes, as ErrorSumsFP8Block takes them.
func (e *ErrAccumulator) AddFP8Block(ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) error {
	if err := checkFP8Dequant(len(ref), len(codes), len(scale), rows, cols, bh, bw); err != nil {
		return err
	}
	e.start()
	callErrLanesFP8(&e.a, ref, codes, scale, rows, cols, bh, bw)
	return nil
}

// start makes the zero ErrAccumulator an empty one.
func (e *ErrAccumulator) start() {
	if !e.set {
		e.a, e.set = newErrAcc(), true
	}
}

// Result returns the sums of everything added, indices relative to base.
func (e *ErrAccumulator) Result(base int64) ErrSums {
	e.start()
	return e.a.result(base)
}

// errLanesFP8 is ErrorSumsFP8Block's loop with the loop set's decode and error sums, 512
// elements of a row at a time.
func errLanesFP8(a *errAcc, ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) {
	var buf [512]float32
	sc := ceilDiv(cols, bw)
	for r := range rows {
		srow := scale[(r/bh)*sc : (r/bh+1)*sc]
		x := ref[r*cols : (r+1)*cols]
		c := codes[r*cols : (r+1)*cols]
		for c0 := 0; c0 < cols; c0 += len(buf) {
			c1 := min(cols, c0+len(buf))
			for bj := c0 / bw; bj*bw < c1; bj++ {
				b0, b1 := max(c0, bj*bw), min(c1, (bj+1)*bw)
				callDecodeE4M3(buf[b0-c0:b1-c0], c[b0:b1], srow[bj])
			}
			callErrLanes(a, x[c0:c1], buf[:c1-c0])
		}
	}
}
