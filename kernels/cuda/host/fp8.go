//go:build cuda || cudaemu

package host

import (
	"encoding/binary"

	"pdq/kernels"
)

const fp8B = kernels.FP8Block

// QuantizeFP8Block implements kernels.Backend. Chunks are bands of whole 128-row blocks.
func (o Ops) QuantizeFP8Block(codes []byte, scaleInv []float32, src []float32, rows, cols int) error {
	n := rows * cols
	if rows < 0 || cols < 0 || len(src) != n || len(codes) != n || len(scaleInv) != ceilDiv(rows, fp8B)*ceilDiv(cols, fp8B) {
		// The CPU reports the same shape errors before touching any element.
		return kernels.CPU{}.QuantizeFP8Block(codes, scaleInv, src, rows, cols)
	}
	if n == 0 {
		return nil
	}
	bc := ceilDiv(cols, fp8B)
	cr := rowsPerChunk(rows, 4*cols, fp8B)
	// Chunk output: codes, then the block scales (8-byte aligned), then the non-finite marker.
	layout := func(m, sc int) (scales, bad, total int) {
		scales = roundUp(m, 8)
		bad = scales + roundUp(4*sc, 8)
		return scales, bad, bad + 8
	}
	var bad error
	return o.R.Run(Job{
		Chunks: ceilDiv(rows, cr),
		Sizes: func(i int) (int, int) {
			h := min(rows, (i+1)*cr) - i*cr
			_, _, t := layout(h*cols, ceilDiv(h, fp8B)*bc)
			return 4 * h * cols, t
		},
		Stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			copy(in, f32Bytes(src[r0*cols:r1*cols]))
		},
		Launch: func(i int, s Stream, din, dout uint64) error {
			h := min(rows, (i+1)*cr) - i*cr
			br := ceilDiv(h, fp8B)
			sOff, bOff, _ := layout(h*cols, br*bc)
			if err := s.Memset8(dout+uint64(bOff), 0xff, 8); err != nil {
				return err
			}
			if err := s.Launch(FP8Absmax, bc, br, 256, dout+uint64(sOff), dout+uint64(bOff), din, uint64(h), uint64(cols)); err != nil {
				return err
			}
			const threads = 256
			return s.Launch(FP8Quant, min(ceilDiv(cols, threads), 64), min(h, 65535), threads,
				dout, dout+uint64(sOff), din, uint64(h), uint64(cols))
		},
		Finish: func(i int, o []byte) error {
			if bad != nil {
				return bad
			}
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			h := r1 - r0
			br := ceilDiv(h, fp8B)
			sOff, bOff, _ := layout(h*cols, br*bc)
			if k := binary.LittleEndian.Uint64(o[bOff:]); k != noBad {
				// key = ((block row·bc + block col)·128 + row in block)·128 + column in block
				c, r, blk := int(k%fp8B), int(k/fp8B%fp8B), int(k/(fp8B*fp8B))
				row := r0 + blk/bc*fp8B + r
				idx := int64(row)*int64(cols) + int64(blk%bc*fp8B+c)
				bad = &kernels.NonFiniteError{Index: idx, Value: src[idx]}
				return bad
			}
			copy(codes[r0*cols:r1*cols], o[:h*cols])
			b0 := r0 / fp8B
			copy(f32Bytes(scaleInv[b0*bc:(b0+br)*bc]), o[sOff:sOff+4*br*bc])
			return nil
		},
	})
}

// DequantizeFP8Block implements kernels.Backend.
func (o Ops) DequantizeFP8Block(dst []float32, codes []byte, scale []float32, rows, cols, bh, bw int) error {
	n := rows * cols
	if rows < 0 || cols < 0 || bh <= 0 || bw <= 0 || len(dst) != n || len(codes) != n || len(scale) != ceilDiv(rows, bh)*ceilDiv(cols, bw) {
		return kernels.CPU{}.DequantizeFP8Block(dst, codes, scale, rows, cols, bh, bw)
	}
	if n == 0 {
		return nil
	}
	sc := ceilDiv(cols, bw)
	cr := rowsPerChunk(rows, 4*cols, 1)
	// The scale rows a chunk of rows [r0, r1) needs.
	srows := func(r0, r1 int) (int, int) { return r0 / bh, (r1-1)/bh + 1 }
	return o.R.Run(Job{
		Chunks: ceilDiv(rows, cr),
		Sizes: func(i int) (int, int) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			s0, s1 := srows(r0, r1)
			return roundUp((r1-r0)*cols, 8) + 4*(s1-s0)*sc, 4 * (r1 - r0) * cols
		},
		Stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			s0, s1 := srows(r0, r1)
			copy(in, codes[r0*cols:r1*cols])
			copy(in[roundUp((r1-r0)*cols, 8):], f32Bytes(scale[s0*sc:s1*sc]))
		},
		Launch: func(i int, s Stream, din, dout uint64) error {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			h := r1 - r0
			const threads = 256
			return s.Launch(DequantFP8, min(ceilDiv(cols, threads), 64), min(h, 65535), threads,
				dout, din, din+uint64(roundUp(h*cols, 8)), o.R.E4M3Table(),
				uint64(h), uint64(cols), uint64(bh), uint64(bw), uint64(r0%bh))
		},
		Finish: func(i int, o []byte) error {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			copy(f32Bytes(dst[r0*cols:r1*cols]), o)
			return nil
		},
	})
}
