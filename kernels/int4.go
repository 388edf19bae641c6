package kernels

import (
	"encoding/binary"
	"math"

	"pdq/internal/floatcodec"
)

// CPU is the pure-Go backend and the reference every other backend must match bit for bit.
// It holds no state; the zero value is ready and safe for concurrent use.
type CPU struct{}

// CPU implements Backend.
var _ Backend = CPU{}

// Name returns "cpu".
func (CPU) Name() string { return "cpu" }

// QuantizeInt4 implements Backend. It allocates nothing.
func (CPU) QuantizeInt4(out Int4Out, src []float32, rows, cols int, p *Int4Params) error {
	g := p.GroupSize
	ng, err := checkInt4Shapes(out, src, rows, cols, g)
	if err != nil {
		return err
	}
	done, err := callQuantBatches(out, src, ng, p)
	if err != nil {
		return err
	}
	for k := done; k < ng; k++ {
		if err := quantGroupAt(out, src, k, p); err != nil {
			return err
		}
	}
	return nil
}

// quantGroupAt quantizes group k of src one group at a time into out (its packed bytes, BF16
// scale and statistics): the per-group loop, and the path of every group a batch leaves.
func quantGroupAt(out Int4Out, src []float32, k int, p *Int4Params) error {
	g := p.GroupSize
	x := src[k*g : (k+1)*g : (k+1)*g]
	s, st, bad := quantGroup(out.Packed[k*g/2:(k+1)*g/2], x, p)
	if bad >= 0 {
		return &NonFiniteError{Index: int64(k*g + bad), Value: x[bad]}
	}
	binary.LittleEndian.PutUint16(out.Scales[2*k:], floatcodec.Float32ToBF16(s))
	out.Stats[k] = st
	return nil
}

// quantGroup quantizes one group into dst (len(x)/2 bytes) and returns its scale (a BF16 value)
// and statistics; bad is the index of the first non-finite element, or -1.
func quantGroup(dst []byte, x []float32, p *Int4Params) (s float32, st GroupStats, bad int) {
	ab := lp.absMaxBits(x)
	if ab >= 0x7f800000 {
		return 0, st, firstNonFinite(x)
	}
	a := math.Float32frombits(ab)
	sR := floatcodec.RoundBF16(a / 7.5)
	if sR == 0 {
		// All zeros, or values so small that the scale rounds to zero: every level is 0.
		ss := lp.sumSq(x)
		for i := range dst {
			dst[i] = 0x88
		}
		return 0, GroupStats{SumSq: ss, Err: ss, RTNErr: ss}, -1
	}
	s, div := sR, true
	var rtnErr float32
	searched := p.Search == SearchMSE && a >= TinyAbsMax
	if searched {
		s, div, rtnErr = search(x, a, sR, p)
	}
	st = pack(dst, x, s, div)
	if !searched {
		st.RTNErr = st.Err
	} else {
		st.RTNErr = rtnErr
	}
	return s, st, -1
}

// search returns the scale with the smallest error among the RTN scale sR, the candidates of p
// and their least-squares refinements. div reports whether the levels are those of RTN
// (x/s); otherwise they are rne(clamp(x·(1/s))). rtnErr is the error of the RTN scale.
func search(x []float32, a, sR float32, p *Int4Params) (best float32, div bool, rtnErr float32) {
	bestE := lp.errDiv(x, sR)
	rtnErr = bestE
	best, div = sR, true
	// The candidates in the order they are tried, then their errors in one batch: the first
	// strictly smaller error wins, exactly as when each is tried in turn.
	var buf, ebuf [2 * maxCandidates]float32
	cand := candidates(buf[:0], x, a, sR, p)
	errs := ebuf[:0]
	if len(cand) <= len(ebuf) {
		errs = ebuf[:len(cand)]
	} else {
		errs = make([]float32, len(cand)) // hand-built params with more candidates than the tables
	}
	callErrMulBatch(x, cand, errs)
	for i, e := range errs {
		if e < bestE {
			bestE, best, div = e, cand[i], false
		}
	}
	if p.Refine <= 0 {
		return best, div, rtnErr
	}
	var sxq, sqq float32
	if div {
		_, sxq, sqq = lp.errSumsDiv(x, best)
	} else {
		_, sxq, sqq = lp.errSumsMul(x, best, 1/best)
	}
	for range p.Refine {
		if sqq == 0 {
			break
		}
		s := floatcodec.RoundBF16(sxq / sqq)
		if s == best || s == 0 || (!p.Signed && s < 0) {
			break
		}
		e, sxq2, sqq2 := lp.errSumsMul(x, s, 1/s)
		if !(e < bestE) {
			break
		}
		bestE, best, div, sxq, sqq = e, s, false, sxq2, sqq2
	}
	return best, div, rtnErr
}

// maxCandidates bounds len(Int4Params.Pos) and len(Int4Params.Neg).
const maxCandidates = 64

// candidates appends to dst the scales search tries after the RTN scale sR, in order: bf16(a·k)
// for k in p.Pos, skipping repeats of the previous one and sR, then with signed scales
// σ·bf16(a·k) for k in p.Neg (σ = -sign of the first extreme), skipping repeats.
func candidates(dst, x []float32, a, sR float32, p *Int4Params) []float32 {
	if d, ok := callCandidatesPos(dst, a, sR, p); ok {
		return signedCandidates(d, x, a, p)
	}
	var prev float32
	for _, k := range p.Pos {
		s := floatcodec.RoundBF16(a * k)
		if s == prev || s == sR {
			continue
		}
		prev = s
		dst = append(dst, s)
	}
	return signedCandidates(dst, x, a, p)
}

// signedCandidates appends the negative-scale candidates of candidates.
func signedCandidates(dst, x []float32, a float32, p *Int4Params) []float32 {
	if p.Signed && len(p.Neg) > 0 {
		sign := float32(1)
		if extreme(x, a) > 0 {
			sign = -1
		}
		var prev float32
		for _, k := range p.Neg {
			s := floatcodec.RoundBF16(a * k)
			if s == prev {
				continue
			}
			prev = s
			dst = append(dst, s*sign)
		}
	}
	return dst
}

// errMulBatch sets errs[i] = errMul(x, s[i], 1/s[i]).
func errMulBatch(x, s, errs []float32) {
	for i, si := range s {
		errs[i] = errMul(x, si, 1/si)
	}
}

// absMaxBits returns the largest bit pattern of |x|: for non-negative floats integer order is
// numeric order, and NaN and Inf sort above every finite value.
func absMaxBits(x []float32) uint32 {
	var m0, m1, m2, m3 uint32
	for len(x) >= 4 {
		v := x[:4:4]
		m0 = max(m0, math.Float32bits(v[0])&0x7fffffff)
		m1 = max(m1, math.Float32bits(v[1])&0x7fffffff)
		m2 = max(m2, math.Float32bits(v[2])&0x7fffffff)
		m3 = max(m3, math.Float32bits(v[3])&0x7fffffff)
		x = x[4:]
	}
	for _, v := range x {
		m0 = max(m0, math.Float32bits(v)&0x7fffffff)
	}
	return max(max(m0, m1), max(m2, m3))
}

// extreme returns the first element of x whose magnitude is a.
func extreme(x []float32, a float32) float32 {
	for _, v := range x {
		if v == a || v == -a {
			return v
		}
	}
	return a
}

func firstNonFinite(x []float32) int {
	for i, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// checkInt4Shapes checks the group size and the slice lengths of an INT4 quantization of a
// rows×cols slab in groups of g, and returns the number of groups.
func checkInt4Shapes(out Int4Out, src []float32, rows, cols, g int) (int, error) {
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 {
		return 0, shapeErr("INT4 row", cols, g)
	}
	n := rows * cols
	ng := n / g
	switch {
	case len(src) != n:
		return 0, shapeErr("source", len(src), n)
	case len(out.Packed) != n/2:
		return 0, shapeErr("packed bytes", len(out.Packed), n/2)
	case len(out.Scales) != 2*ng:
		return 0, shapeErr("scale bytes", len(out.Scales), 2*ng)
	case len(out.Stats) != ng:
		return 0, shapeErr("group stats", len(out.Stats), ng)
	}
	return ng, nil
}
