//go:build cuda || cudaemu

package host

import (
	"encoding/binary"
	"math"

	"pdq/kernels"
)

// fusedLayout is where one chunk's data lies. Input: the source bytes, the FP8 source scales,
// the INT4 candidate table. Output, coming back: the INT4 results (int4Layout), the FP8 codes,
// multipliers and non-finite marker, and the error partial sums of both. Output, device scratch
// only: the decoded values, a dequantization and the INT4 scales widened to float32.
type fusedLayout struct {
	m, ng, br, k             int
	srcScale, cand, weights  int
	inTotal                  int
	i4                       int4Layout
	fp8, fp8Scales, fp8Bad   int
	sums4, sums8, back       int
	vals, deq, f32s, outSize int
}

func fusedOut(s *FusedSource, h, s0, s1, ncand, g int) fusedLayout {
	var l fusedLayout
	cols := s.Cols
	l.m = h * cols
	l.ng = l.m / g
	l.br = ceilDiv(h, fp8B)
	l.k = ceilDiv(l.m, ErrChunk)
	raw := 2 * l.m
	if s.DType == kernels.F8E4M3 {
		raw = l.m
	}
	l.srcScale = roundUp(raw, 8)
	l.cand = l.srcScale
	if s.DType == kernels.F8E4M3 {
		l.cand += roundUp(4*(s1-s0)*ceilDiv(cols, s.BW), 8)
	}
	l.weights = l.cand + 4*ncand
	l.inTotal = l.weights
	if s.Weights != nil {
		l.inTotal += 4 * cols
	}
	l.i4 = int4Out(l.m, l.ng)
	l.fp8 = roundUp(l.i4.total, 8)
	l.fp8Scales = l.fp8 + roundUp(l.m, 8)
	l.fp8Bad = l.fp8Scales + roundUp(4*l.br*ceilDiv(cols, fp8B), 8)
	l.sums4 = l.fp8Bad + 8
	l.sums8 = l.sums4 + 56*l.k
	l.back = l.sums8 + 56*l.k
	l.vals = roundUp(l.back, 16)
	l.deq = l.vals + 4*l.m
	l.f32s = l.deq + 4*l.m
	l.outSize = l.f32s + 4*l.ng
	return l
}

// Fused runs the fused pass (FusedCPU) on the device: the source goes in as stored, decoding,
// both quantizations, packing, both dequantizations and the error sums run on the device, and
// only the output bytes and the per-chunk partial sums come back. Chunks are bands of whole
// 128-row FP8 blocks; the pipeline overlaps their copies and kernels. The results are FusedCPU's
// bytes; the error sums' N, MaxAbsErr and MaxAbsIdx are exact and the five sums within
// parity.ErrSumsBound of the CPU's (see ErrorSumsChunked).
func (o Ops) Fused(out *FusedOut, s FusedSource, p *kernels.Int4Params, base int64) error {
	if err := s.check(out, p); err != nil {
		return err
	}
	rows, cols, g := s.Rows, s.Cols, p.GroupSize
	cand := append(append([]float32(nil), p.Pos...), p.Neg...)
	mode := Int4Mode(p)
	kern := Int4Kernel(g)
	weighted := s.Weights != nil && p.Search == kernels.SearchMSE
	if weighted {
		cand = append(cand, p.WPos...)
	}
	bc := ceilDiv(cols, fp8B)
	sc := 0
	if s.DType == kernels.F8E4M3 {
		sc = ceilDiv(cols, s.BW)
	}
	cr := rowsPerChunk(rows, 4*cols, fp8B)
	span := func(i int) (r0, r1, s0, s1 int) {
		r0, r1 = i*cr, min(rows, (i+1)*cr)
		if s.DType == kernels.F8E4M3 {
			s0, s1 = r0/s.BH, (r1-1)/s.BH+1
		}
		return
	}
	layout := func(i int) fusedLayout {
		r0, r1, s0, s1 := span(i)
		return fusedOut(&s, r1-r0, s0, s1, len(cand), g)
	}
	sums4 := kernels.ErrSums{N: int64(rows * cols), MaxAbsIdx: -1}
	sums8 := sums4
	var bad error
	err := o.R.Run(Job{
		Chunks: ceilDiv(rows, cr),
		Sizes: func(i int) (int, int) {
			l := layout(i)
			return l.inTotal, l.outSize
		},
		Back: func(i int) int { return layout(i).back },
		Stage: func(i int, in []byte) {
			r0, r1, s0, s1 := span(i)
			l := layout(i)
			if s.DType == kernels.F8E4M3 {
				copy(in, s.Raw[r0*cols:r1*cols])
				copy(in[l.srcScale:], f32Bytes(s.Scale[s0*sc:s1*sc]))
			} else {
				copy(in, s.Raw[2*r0*cols:2*r1*cols])
			}
			copy(in[l.cand:], f32Bytes(cand))
			if s.Weights != nil {
				copy(in[l.weights:], f32Bytes(s.Weights))
			}
		},
		Launch: func(i int, st Stream, din, dout uint64) error {
			r0, r1, _, _ := span(i)
			h := r1 - r0
			l := layout(i)
			at := func(off int) uint64 { return dout + uint64(off) }
			m := uint64(l.m)
			const threads = 256
			var err error
			launch := func(k Kernel, gx, gy, t int, args ...uint64) {
				if err == nil {
					err = st.Launch(k, gx, gy, t, args...)
				}
			}
			// Decode the source into vals.
			switch s.DType {
			case kernels.BF16:
				launch(DecodeBF16, o.R.Grid(l.m, threads), 1, threads, at(l.vals), din, m)
			case kernels.F16:
				launch(DecodeF16, o.R.Grid(l.m, threads), 1, threads, at(l.vals), din, m)
			default:
				launch(DequantFP8, min(ceilDiv(cols, threads), 64), min(h, 65535), threads,
					at(l.vals), din, din+uint64(l.srcScale), o.R.E4M3Table(),
					uint64(h), uint64(cols), uint64(s.BH), uint64(s.BW), uint64(r0%s.BH))
			}
			// INT4: quantize, widen the BF16 scales, dequantize, sum the errors.
			if err == nil {
				err = st.Memset8(at(l.i4.bad), 0xff, 8)
			}
			if weighted {
				launch(Int4Weighted, o.R.Grid(l.ng, 128), 1, 128, at(0), at(l.i4.scales), at(l.i4.stats),
					at(l.i4.bad), at(l.vals), Int4Shape(l.ng, g), mode, din+uint64(l.cand),
					din+uint64(l.weights), Int4WMode(p), uint64(cols/g))
			} else {
				launch(kern, o.R.Grid(l.ng, 128), 1, 128, at(0), at(l.i4.scales), at(l.i4.stats),
					at(l.i4.bad), at(l.vals), Int4Shape(l.ng, g), mode, din+uint64(l.cand))
			}
			launch(DecodeBF16, o.R.Grid(l.ng, threads), 1, threads, at(l.f32s), at(l.i4.scales), uint64(l.ng))
			launch(DequantInt4, o.R.Grid(l.m/8, threads), 1, threads, at(l.deq), at(0), at(l.f32s),
				m/8, uint64(g/8))
			launch(ErrPartial, o.R.Grid(l.k, 128), 1, 128, at(l.sums4), at(l.sums4+48*l.k),
				at(l.vals), at(l.deq), m, ErrChunk)
			// FP8 blocks: quantize, dequantize, sum the errors.
			if err == nil {
				err = st.Memset8(at(l.fp8Bad), 0xff, 8)
			}
			launch(FP8Absmax, bc, l.br, 256, at(l.fp8Scales), at(l.fp8Bad), at(l.vals), uint64(h), uint64(cols))
			launch(FP8Quant, min(ceilDiv(cols, threads), 64), min(h, 65535), threads,
				at(l.fp8), at(l.fp8Scales), at(l.vals), uint64(h), uint64(cols))
			launch(DequantFP8, min(ceilDiv(cols, threads), 64), min(h, 65535), threads,
				at(l.deq), at(l.fp8), at(l.fp8Scales), o.R.E4M3Table(),
				uint64(h), uint64(cols), fp8B, fp8B, 0)
			launch(ErrPartial, o.R.Grid(l.k, 128), 1, 128, at(l.sums8), at(l.sums8+48*l.k),
				at(l.vals), at(l.deq), m, ErrChunk)
			return err
		},
		Finish: func(i int, b []byte) error {
			if bad != nil {
				return bad
			}
			r0, r1, _, _ := span(i)
			l := layout(i)
			first := int64(r0 * cols)
			if k := binary.LittleEndian.Uint64(b[l.i4.bad:]); k != noBad {
				idx := first + int64(k)
				bad = &kernels.NonFiniteError{Index: idx, Value: s.value(idx)}
				return bad
			}
			if k := binary.LittleEndian.Uint64(b[l.fp8Bad:]); k != noBad {
				// Unreachable: the INT4 pass sees every element first. Kept as a guard.
				bad = &kernels.NonFiniteError{Index: first, Value: float32(math.NaN())}
				return bad
			}
			gr0, gr1 := r0*cols/g, r1*cols/g
			copy(out.Int4.Packed[r0*cols/2:r1*cols/2], b[:l.i4.scales])
			copy(out.Int4.Scales[2*gr0:2*gr1], b[l.i4.scales:l.i4.scales+2*(gr1-gr0)])
			copy(statsBytes(out.Int4.Stats[gr0:gr1]), b[l.i4.stats:l.i4.bad])
			copy(out.FP8Codes[r0*cols:r1*cols], b[l.fp8:l.fp8+l.m])
			b0 := r0 / fp8B
			copy(f32Bytes(out.FP8Scales[b0*bc:(b0+l.br)*bc]), b[l.fp8Scales:l.fp8Scales+4*l.br*bc])
			addPartials(&sums4, b[l.sums4:], l.k, base+first)
			addPartials(&sums8, b[l.sums8:], l.k, base+first)
			return nil
		},
	})
	if err != nil {
		return err
	}
	out.Int4Sums, out.FP8Sums = sums4, sums8
	return nil
}

// addPartials adds k chunk sums of err_partial (six float64 each, then k indices) to s in
// chunk order; indices are relative to first.
func addPartials(s *kernels.ErrSums, b []byte, k int, first int64) {
	for c := range k {
		f := func(j int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[48*c+8*j:])) }
		s.SumSqRef += f(0)
		s.SumSqErr += f(1)
		s.SumAbsErr += f(2)
		s.Dot += f(3)
		s.SumSqGot += f(4)
		if mx := f(5); mx > s.MaxAbsErr || s.MaxAbsIdx < 0 {
			s.MaxAbsErr, s.MaxAbsIdx = mx, first+int64(binary.LittleEndian.Uint64(b[48*k+8*c:]))
		}
	}
}

// Fused is Ops.Fused on one of the devices.
func (p *Pool) Fused(out *FusedOut, s FusedSource, q *kernels.Int4Params, base int64) (err error) {
	p.on(func(o Ops) { err = o.Fused(out, s, q, base) })
	return err
}
