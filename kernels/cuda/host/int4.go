//go:build cuda || cudaemu

package host

import (
	"encoding/binary"

	"pdq/kernels"
)

// int4Layout is the chunk output: packed words, BF16 scales, stats, the non-finite marker.
type int4Layout struct{ packed, scales, stats, bad, total int }

func int4Out(n, ng int) int4Layout {
	var l int4Layout
	l.scales = n / 2
	l.stats = roundUp(l.scales+2*ng, 16)
	l.bad = l.stats + StatsSize*ng
	l.total = l.bad + 8
	return l
}

// QuantizeInt4 implements kernels.Backend.
func (o Ops) QuantizeInt4(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params) error {
	g := p.GroupSize
	n := rows * cols
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 || len(src) != n || len(out.Packed) != n/2 ||
		len(out.Scales) != 2*(n/g) || len(out.Stats) != n/g {
		// The CPU checks the same shapes first and reports them before touching any element.
		return kernels.CPU{}.QuantizeInt4(out, src, rows, cols, p)
	}
	if n == 0 {
		return nil
	}
	cand := append(append([]float32(nil), p.Pos...), p.Neg...)
	mode := Int4Mode(p)
	kern := Int4Kernel(g)
	cr := rowsPerChunk(rows, 4*cols, 1)
	return o.R.Run(Job{
		Chunks: ceilDiv(rows, cr),
		Sizes: func(i int) (int, int) {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			return 4*m + 4*len(cand), int4Out(m, m/g).total
		},
		Stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			m := (r1 - r0) * cols
			copy(in, f32Bytes(src[r0*cols:r1*cols]))
			copy(in[4*m:], f32Bytes(cand))
		},
		Launch: func(i int, s Stream, din, dout uint64) error {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			l := int4Out(m, m/g)
			if err := s.Memset8(dout+uint64(l.bad), 0xff, 8); err != nil {
				return err
			}
			const threads = 128
			groups := m / g
			return s.Launch(kern, o.R.Grid(groups, threads), 1, threads,
				dout, dout+uint64(l.scales), dout+uint64(l.stats),
				dout+uint64(l.bad), din, Int4Shape(groups, g), mode,
				din+uint64(4*m))
		},
		Finish: int4Finish(out, src, rows, cols, cr, g),
	})
}

// DequantizeInt4 implements kernels.Backend.
func (o Ops) DequantizeInt4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	g := groupSize
	n := rows * cols
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 || len(dst) != n || len(packed) != n/2 || len(scales) != n/g {
		return kernels.CPU{}.DequantizeInt4(dst, packed, scales, rows, cols, groupSize)
	}
	if n == 0 {
		return nil
	}
	cr := rowsPerChunk(rows, 4*cols, 1)
	return o.R.Run(Job{
		Chunks: ceilDiv(rows, cr),
		Sizes: func(i int) (int, int) {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			return m/2 + 4*(m/g), 4 * m
		},
		Stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			m := (r1 - r0) * cols
			copy(in, packed[r0*cols/2:r1*cols/2])
			copy(in[m/2:], f32Bytes(scales[r0*cols/g:r1*cols/g]))
		},
		Launch: func(i int, s Stream, din, dout uint64) error {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			const threads = 256
			return s.Launch(DequantInt4, o.R.Grid(m/8, threads), 1, threads,
				dout, din, din+uint64(m/2), uint64(m/8), uint64(g/8))
		},
		Finish: func(i int, o []byte) error {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			copy(f32Bytes(dst[r0*cols:r1*cols]), o)
			return nil
		},
	})
}

// int4Finish is the Finish step of the INT4 jobs (rtn, mse and the weighted search): a chunk's
// non-finite report first (the first one found stops every later chunk), then its packed words,
// BF16 scales and group statistics copied into out.
func int4Finish(out kernels.Int4Out, src []float32, rows, cols, cr, g int) func(int, []byte) error {
	var bad error
	return func(i int, o []byte) error {
		if bad != nil {
			return bad
		}
		r0, r1 := i*cr, min(rows, (i+1)*cr)
		m := (r1 - r0) * cols
		l := int4Out(m, m/g)
		if k := binary.LittleEndian.Uint64(o[l.bad:]); k != noBad {
			idx := int64(r0*cols) + int64(k)
			bad = &kernels.NonFiniteError{Index: idx, Value: src[idx]}
			return bad
		}
		gr0, gr1 := r0*cols/g, r1*cols/g
		copy(out.Packed[r0*cols/2:r1*cols/2], o[:l.scales])
		copy(out.Scales[2*gr0:2*gr1], o[l.scales:l.scales+2*(gr1-gr0)])
		copy(statsBytes(out.Stats[gr0:gr1]), o[l.stats:l.bad])
		return nil
	}
}
