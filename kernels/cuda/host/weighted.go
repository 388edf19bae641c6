//go:build cuda || cudaemu

package host

import (
	"math"

	"pdq/kernels"
)

// Int4WMode packs the weighted search's extra parameters into the wmode argument of
// int4_quant_weighted: len(WPos) | WFineN<<16 | bits(WFine)<<32 (the candidate table is Pos,
// Neg, WPos).
func Int4WMode(p *kernels.Int4Params) uint64 {
	return uint64(len(p.WPos)) | uint64(p.WFineN)<<16 | uint64(math.Float32bits(p.WFine))<<32
}

// QuantizeInt4Weighted is kernels.CPU.QuantizeInt4Weighted on the device, with its bytes and
// statistics: the weighted scale search with one non-negative weight per column (d). Without
// the search (rtn) it is QuantizeInt4.
func (o Ops) QuantizeInt4Weighted(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params, d []float32) error {
	g := p.GroupSize
	n := rows * cols
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 || len(src) != n || len(out.Packed) != n/2 ||
		len(out.Scales) != 2*(n/g) || len(out.Stats) != n/g || len(d) != cols {
		return kernels.CPU{}.QuantizeInt4Weighted(out, src, rows, cols, p, d)
	}
	if p.Search != kernels.SearchMSE {
		return o.QuantizeInt4(out, src, rows, cols, p)
	}
	if n == 0 {
		return nil
	}
	cand := append(append(append([]float32(nil), p.Pos...), p.Neg...), p.WPos...)
	mode, wmode := Int4Mode(p), Int4WMode(p)
	cr := rowsPerChunk(rows, 4*cols, 1)
	return o.R.Run(Job{
		Chunks: ceilDiv(rows, cr),
		Sizes: func(i int) (int, int) {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			return 4*m + 4*cols + 4*len(cand), int4Out(m, m/g).total
		},
		Stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			m := (r1 - r0) * cols
			copy(in, f32Bytes(src[r0*cols:r1*cols]))
			copy(in[4*m:], f32Bytes(d))
			copy(in[4*m+4*cols:], f32Bytes(cand))
		},
		Launch: func(i int, s Stream, din, dout uint64) error {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			l := int4Out(m, m/g)
			if err := s.Memset8(dout+uint64(l.bad), 0xff, 8); err != nil {
				return err
			}
			const threads = 128
			groups := m / g
			return s.Launch(Int4Weighted, o.R.Grid(groups, threads), 1, threads,
				dout, dout+uint64(l.scales), dout+uint64(l.stats), dout+uint64(l.bad), din,
				Int4Shape(groups, g), mode, din+uint64(4*m+4*cols), din+uint64(4*m), wmode, uint64(cols/g))
		},
		Finish: int4Finish(out, src, rows, cols, cr, g),
	})
}

// QuantizeInt4Weighted is Ops.QuantizeInt4Weighted on one of the devices.
func (p *Pool) QuantizeInt4Weighted(out kernels.Int4Out, src []float32, rows, cols int, q *kernels.Int4Params, d []float32) (err error) {
	p.on(func(o Ops) { err = o.QuantizeInt4Weighted(out, src, rows, cols, q, d) })
	return err
}
