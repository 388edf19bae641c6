package kernels

import (
	"math"

	"pdq/internal/floatcodec"
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
		callBlockRowAbsMax(amax, src, cols, r0, r1)
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
			lp.encodeE4M3Row(codes[r*cols:(r+1)*cols], src[r*cols:(r+1)*cols], sc)
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

// blockRowAbsMax sets amax[bj] to blockAbsMax of block bj of the block row of src (cols
// wide) in rows r0 to r1, for every block of the row, with the loop set's blockAbsMax.
func blockRowAbsMax(amax []uint32, src []float32, cols, r0, r1 int) {
	for bj := range amax {
		amax[bj] = lp.blockAbsMax(src, cols, r0, r1, bj*FP8Block, min(cols, (bj+1)*FP8Block))
	}
}

// blockAbsMax returns the largest |x| bit pattern of the block of src (cols wide) in rows r0 to
// r1 and columns c0 to c1, row by row with absMaxBits.
func blockAbsMax(src []float32, cols, r0, r1, c0, c1 int) uint32 {
	return blockAbsMaxBy(absMaxBits, src, cols, r0, r1, c0, c1)
}

func blockAbsMaxBy(absMax func([]float32) uint32, src []float32, cols, r0, r1, c0, c1 int) uint32 {
	var m uint32
	for r := r0; r < r1; r++ {
		m = max(m, absMax(src[r*cols+c0:r*cols+c1]))
	}
	return m
}

// encodeE4M3Row encodes a row of FP8 blocks (FP8Block columns each, the last one shorter), block
// bj with scale sc[bj], with encodeE4M3Scalar.
func encodeE4M3Row(codes []byte, row []float32, sc []float32) {
	encodeE4M3RowBy(encodeE4M3Scalar, codes, row, sc)
}

func encodeE4M3RowBy(encode func([]byte, []float32, float32), codes []byte, row []float32, sc []float32) {
	for bj, s := range sc {
		c0, c1 := bj*FP8Block, min(len(row), (bj+1)*FP8Block)
		encode(codes[c0:c1], row[c0:c1], s)
	}
}

// DequantizeFP8Block implements Backend.
func (CPU) DequantizeFP8Block(dst []float32, codes []byte, scale []float32, rows, cols, bh, bw int) error {
	if err := checkFP8Dequant(len(dst), len(codes), len(scale), rows, cols, bh, bw); err != nil {
		return err
	}
	sc := ceilDiv(cols, bw)
	for r := range rows {
		srow := scale[(r/bh)*sc : (r/bh+1)*sc]
		d := dst[r*cols : (r+1)*cols]
		c := codes[r*cols : (r+1)*cols]
		for bj, s := range srow {
			c0, c1 := bj*bw, min(cols, (bj+1)*bw)
			lp.decodeE4M3(d[c0:c1], c[c0:c1], s)
		}
	}
	return nil
}

// checkFP8Dequant checks the lengths of an FP8 block dequantization of a rows×cols slab with
// bh×bw blocks: the destination (or reference), the codes and the scales.
func checkFP8Dequant(nDst, nCodes, nScale, rows, cols, bh, bw int) error {
	if rows < 0 || cols < 0 || bh <= 0 || bw <= 0 {
		return shapeErr("FP8 block", bh, bw)
	}
	n := rows * cols
	ns := ceilDiv(rows, bh) * ceilDiv(cols, bw)
	switch {
	case nDst != n:
		return shapeErr("destination", nDst, n)
	case nCodes != n:
		return shapeErr("codes", nCodes, n)
	case nScale != ns:
		return shapeErr("scales", nScale, ns)
	}
	return nil
}

// decodeE4M3Scalar is the specification of FP8 decoding: e4m3(code)·s, one rounding.
func decodeE4M3Scalar(dst []float32, codes []byte, s float32) {
	dst = dst[:len(codes)]
	for j, code := range codes {
		dst[j] = floatcodec.F8E4M3ToFloat32(code) * s
	}
}

// encodeE4M3Scalar is the specification of FP8 block encoding: e4m3(x/s), an IEEE division.
func encodeE4M3Scalar(codes []byte, src []float32, s float32) {
	codes = codes[:len(src)]
	for j, v := range src {
		codes[j] = e4m3(v / s)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
