package kernels

import (
	"encoding/binary"
	"math"

	"pdq/internal/floatcodec"
)

// QuantizeInt4Weighted is QuantizeInt4 with a per-column importance weight: the scale search
// (SearchMSE) minimises Σ_j d_j·(x_j − q_j·s)² over each group instead of the plain squared
// error, d holding one non-negative finite weight per column (calibration E[x_j²] of the input
// feature j). The candidates, the least-squares refinement (s ← bf16(Σd·x·q / Σd·q²)), the
// packing and the eight-lane float32 sums follow the rules of the package documentation; the RTN
// scale is the first candidate, so no group's weighted error exceeds that of RTN. The statistics
// written to out.Stats stay unweighted (SumSq, Err and RTNErr as for QuantizeInt4), so reports
// compare like with like. With SearchRTN, or with every d_j = 1, the output (bytes and statistics)
// is exactly QuantizeInt4's. It is not part of the Backend interface: only the CPU backend
// implements it. On AVX-512 it searches sixteen groups at once (int4weighted_avx512.go), on AVX2
// eight (int4weighted_avx2.go), and may allocate one row of transposed weights per call.
func (CPU) QuantizeInt4Weighted(out Int4Out, src []float32, rows, cols int, p *Int4Params, d []float32) error {
	g := p.GroupSize
	ng, err := checkInt4Shapes(out, src, rows, cols, g)
	if err != nil {
		return err
	}
	if len(d) != cols {
		return shapeErr("column weights", len(d), cols)
	}
	if p.Search != SearchMSE {
		// Without the search the weights play no part: QuantizeInt4's bytes and statistics.
		return CPU{}.QuantizeInt4(out, src, rows, cols, p)
	}
	done, err := callQuantBatchesWeighted(out, src, ng, cols, p, d)
	if err != nil {
		return err
	}
	gpr := cols / g
	for k := done; k < ng; k++ {
		x := src[k*g : (k+1)*g : (k+1)*g]
		c0 := (k % gpr) * g
		w := d[c0 : c0+g : c0+g]
		s, st, bad := quantGroupWeighted(out.Packed[k*g/2:(k+1)*g/2], x, w, p)
		if bad >= 0 {
			return &NonFiniteError{Index: int64(k*g + bad), Value: x[bad]}
		}
		binary.LittleEndian.PutUint16(out.Scales[2*k:], floatcodec.Float32ToBF16(s))
		out.Stats[k] = st
	}
	return nil
}

// quantGroupWeighted is quantGroup with the weighted search.
func quantGroupWeighted(dst []byte, x, w []float32, p *Int4Params) (s float32, st GroupStats, bad int) {
	ab := lp.absMaxBits(x)
	if ab >= 0x7f800000 {
		return 0, st, firstNonFinite(x)
	}
	a := math.Float32frombits(ab)
	sR := floatcodec.RoundBF16(a / 7.5)
	if sR == 0 {
		ss := lp.sumSq(x)
		for i := range dst {
			dst[i] = 0x88
		}
		return 0, GroupStats{SumSq: ss, Err: ss, RTNErr: ss}, -1
	}
	s, div := sR, true
	searched := p.Search == SearchMSE && a >= TinyAbsMax
	if searched {
		s, div = searchWeighted(x, w, a, sR, p)
	}
	st = pack(dst, x, s, div)
	if !searched || div {
		st.RTNErr = st.Err
	} else {
		st.RTNErr = lp.errDiv(x, sR)
	}
	return s, st, -1
}

// searchWeighted is search with the weighted error Σw(x−q·s)². When the group's weights are
// all equal it tries the plain candidates (so unit weights give the plain search's bytes);
// otherwise the coarse candidates p.WPos, then p.WFineN finer ones on each side of the best,
// then the refinement in the weighted metric. The RTN scale is the first candidate throughout.
func searchWeighted(x, w []float32, a, sR float32, p *Int4Params) (best float32, div bool) {
	bestE, sxq, sqq := lp.wSums(x, w, sR, 0, true)
	best, div = sR, true
	var prev float32
	try := func(s float32) bool {
		if e, xq, qq := lp.wSums(x, w, s, 1/s, false); e < bestE {
			bestE, best, div, sxq, sqq = e, s, false, xq, qq
			return true
		}
		return false
	}
	if uniform(w) || len(p.WPos) == 0 {
		for _, k := range p.Pos {
			s := floatcodec.RoundBF16(a * k)
			if s == prev || s == sR {
				continue
			}
			prev = s
			try(s)
		}
	} else {
		kBest := float32(1 / 7.5) // the RTN multiplier, centre of the fine stage if nothing beats it
		for _, k := range p.WPos {
			s := floatcodec.RoundBF16(a * k)
			if s == prev || s == sR {
				continue
			}
			prev = s
			if try(s) {
				kBest = k
			}
		}
		for i := 1; i <= p.WFineN; i++ {
			// The step is rounded before it is added: without the conversion the compiler may
			// fuse the product and the sum (GOAMD64=v3 does), and the multiplier would differ.
			step := float32(float32(i) * p.WFine)
			for _, k := range [2]float32{kBest - step, kBest + step} {
				if s := floatcodec.RoundBF16(a * k); s > 0 && s != best && s != sR {
					try(s)
				}
			}
		}
	}
	if p.Signed && len(p.Neg) > 0 {
		sign := float32(1)
		if extreme(x, a) > 0 {
			sign = -1
		}
		prev = 0
		for _, k := range p.Neg {
			s := floatcodec.RoundBF16(a * k)
			if s == prev {
				continue
			}
			prev = s
			try(sign * s)
		}
	}
	for range p.Refine {
		if sqq == 0 {
			break
		}
		s := floatcodec.RoundBF16(sxq / sqq)
		if s == best || s == 0 || (!p.Signed && s < 0) {
			break
		}
		e, xq, qq := lp.wSums(x, w, s, 1/s, false)
		if !(e < bestE) {
			break
		}
		bestE, best, div, sxq, sqq = e, s, false, xq, qq
	}
	return best, div
}

// uniform reports whether every weight of the group equals the first.
func uniform(w []float32) bool {
	for _, v := range w[1:] {
		if v != w[0] {
			return false
		}
	}
	return true
}

// wSums returns Σw(x−q·s)², Σw·x·q and Σw·q² in the eight-lane order, with q = level(x/s) when
// div is set and level(x·inv) otherwise. Products are rounded to float32 one at a time:
// w·(d·d), (w·x)·q and (w·q)·q.
func wSums(x, w []float32, s, inv float32, div bool) (e, xq, qq float32) {
	var el, xl, ql [8]float32
	for i, v := range x {
		f := v * inv
		if div {
			f = v / s
		}
		q := level(f)
		dd := v - float32(q*s)
		wi := w[i]
		el[i&7] += float32(wi * float32(dd*dd))
		xl[i&7] += float32(float32(wi*v) * q)
		ql[i&7] += float32(float32(wi*q) * q)
	}
	return lanes(el[0], el[1], el[2], el[3], el[4], el[5], el[6], el[7]),
		lanes(xl[0], xl[1], xl[2], xl[3], xl[4], xl[5], xl[6], xl[7]),
		lanes(ql[0], ql[1], ql[2], ql[3], ql[4], ql[5], ql[6], ql[7])
}
