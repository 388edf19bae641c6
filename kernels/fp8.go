package kernels

import (
	"math"

	"pdq/safetensors"
)

// QuantizeFP8Block implements Backend. It allocates nothing for tensors up to 64 block columns
// (8192 columns) and one small slice otherwise.
func (CPU) QuantizeFP8Block(codes []byte, scaleInv []float32, src []float32, rows, cols int) error {
	if rows < 0 || cols < 0 {
		return shapeErr("FP8 shape", rows, cols)
	}
	n := rows * cols
	br, bc := ceilDiv(rows, FP8Block), ceilDiv(cols, FP8Block)
	switch {
	case len(src) != n:
		return shapeErr("source", len(src), n)
	case len(codes) != n:
		return shapeErr("codes", len(codes), n)
	case len(scaleInv) != br*bc:
		return shapeErr("scales", len(scaleInv), br*bc)
	}
	var buf [64]uint32
	amax := buf[:0]
	if bc <= len(buf) {
		amax = buf[:bc]
	} else {
		amax = make([]uint32, bc)
	}
	for bi := range br {
		r0, r1 := bi*FP8Block, min(rows, (bi+1)*FP8Block)
		clear(amax)
		for r := r0; r < r1; r++ {
			row := src[r*cols : (r+1)*cols]
			for bj := range bc {
				amax[bj] = max(amax[bj], absMaxBits(row[bj*FP8Block:min(cols, (bj+1)*FP8Block)]))
			}
		}
		sc := scaleInv[bi*bc : (bi+1)*bc]
		for bj, ab := range amax {
			if ab >= 0x7f800000 {
				return firstNonFiniteBlock(src, cols, r0, r1, bj)
			}
			s := math.Float32frombits(ab) / FP8Max
			if s == 0 {
				s = 1
			}
			sc[bj] = s
		}
		for r := r0; r < r1; r++ {
			row := src[r*cols : (r+1)*cols]
			out := codes[r*cols : (r+1)*cols]
			for bj, s := range sc {
				c0, c1 := bj*FP8Block, min(cols, (bj+1)*FP8Block)
				o := out[c0:c1]
				for j, v := range row[c0:c1] {
					o[j] = e4m3(v / s)
				}
			}
		}
	}
	return nil
}

func firstNonFiniteBlock(src []float32, cols, r0, r1, bj int) error {
	c0, c1 := bj*FP8Block, min(cols, (bj+1)*FP8Block)
	for r := r0; r < r1; r++ {
		if i := firstNonFinite(src[r*cols+c0 : r*cols+c1]); i >= 0 {
			idx := r*cols + c0 + i
			return &NonFiniteError{Index: int64(idx), Value: src[idx]}
		}
	}
	return nil
}

// DequantizeFP8Block implements Backend.
func (CPU) DequantizeFP8Block(dst []float32, codes []byte, scale []float32, rows, cols, bh, bw int) error {
	if rows < 0 || cols < 0 || bh <= 0 || bw <= 0 {
		return shapeErr("FP8 block", bh, bw)
	}
	n := rows * cols
	sr, sc := ceilDiv(rows, bh), ceilDiv(cols, bw)
	switch {
	case len(dst) != n:
		return shapeErr("destination", len(dst), n)
	case len(codes) != n:
		return shapeErr("codes", len(codes), n)
	case len(scale) != sr*sc:
		return shapeErr("scales", len(scale), sr*sc)
	}
	for r := range rows {
		srow := scale[(r/bh)*sc : (r/bh+1)*sc]
		d := dst[r*cols : (r+1)*cols]
		c := codes[r*cols : (r+1)*cols]
		for bj, s := range srow {
			c0, c1 := bj*bw, min(cols, (bj+1)*bw)
			dd := d[c0:c1]
			for j, code := range c[c0:c1] {
				dd[j] = safetensors.F8E4M3ToFloat32(code) * s
			}
		}
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
