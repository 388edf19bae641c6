//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// The FP8 block quantizer's two passes over a 128-row block row, in calls that cover many
// blocks at once: per block and row (128 elements), the call, the constants of the loop and the
// reduction of the maximum cost as much as the block's arithmetic.

// blockAbsMaxAVX512 returns the largest |x| bit pattern of the block of src (cols wide) in rows
// r0 to r1 and columns c0 to c1: one vector maximum over all its rows, reduced once.
func blockAbsMaxAVX512(src []float32, cols, r0, r1, c0, c1 int) uint32 {
	var lanes [16]uint32 // zeroed here, before the vector code
	w := c1 - c0
	n := w &^ 15
	var m uint32
	if n < w { // the scalar tails first, while the upper halves are clean
		for r := r0; r < r1; r++ {
			m = max(m, absMaxBits(src[r*cols+c0+n:r*cols+c1]))
		}
	}
	if n == 0 {
		return m
	}
	abs := bcu16(0x7fffffff)
	var acc0, acc1 archsimd.Uint32x16
	for r := r0; r < r1; r++ {
		row := src[r*cols+c0 : r*cols+c0+n]
		j := 0
		for ; j+32 <= len(row); j += 32 {
			acc0 = acc0.Max(archsimd.LoadFloat32x16((*[16]float32)(row[j:])).AsUint32x16().And(abs))
			acc1 = acc1.Max(archsimd.LoadFloat32x16((*[16]float32)(row[j+16:])).AsUint32x16().And(abs))
		}
		if j < len(row) {
			acc0 = acc0.Max(archsimd.LoadFloat32x16((*[16]float32)(row[j:])).AsUint32x16().And(abs))
		}
	}
	acc0.Max(acc1).Store(&lanes)
	archsimd.ClearAVXUpperBits()
	for _, v := range lanes {
		m = max(m, v)
	}
	return m
}

// blockRowAbsMaxAVX512 sets amax[bj] to the largest |x| bit pattern of block bj of the block
// row of src (cols wide) in rows r0 to r1, for every block of the row. The whole blocks go
// through blockRowAbsMaxAsm, which reads the rows in memory order (a block at a time, 128
// rows 8 KiB apart for 2048 columns, left the hardware prefetchers a new page every 512
// bytes); the last, narrower block through blockAbsMaxAVX512.
func blockRowAbsMaxAVX512(amax []uint32, src []float32, cols, r0, r1 int) {
	var acc [64][16]uint32 // zeroed here, while the upper halves are clean
	nb := cols / FP8Block
	if r1 > r0 {
		for b0 := 0; b0 < nb; b0 += len(acc) {
			n := min(len(acc), nb-b0)
			if b0 > 0 {
				acc = [len(acc)][16]uint32{}
			}
			_, _ = amax[b0+n-1], src[(r1-1)*cols+(b0+n)*FP8Block-1]
			blockRowAbsMaxAsm(&acc[0], &src[r0*cols+b0*FP8Block], 4*cols, r1-r0, n)
			for b, lanes := range acc[:n] {
				var m uint32
				for _, v := range lanes {
					m = max(m, v)
				}
				amax[b0+b] = m
			}
		}
	}
	if nb < len(amax) {
		amax[nb] = blockAbsMaxAVX512(src, cols, r0, r1, nb*FP8Block, cols)
	}
}

// encodeE4M3RowAVX512 is encodeE4M3AVX512 over a row of blocks: the elements of block bj
// (FP8Block columns, the last one shorter) with scale sc[bj]; the scalar tail of the last
// block first, while the upper halves are clean, then the rest in encodeE4M3RowAsm.
func encodeE4M3RowAVX512(codes []byte, row []float32, sc []float32) {
	if len(sc) == 0 {
		return
	}
	codes = codes[:len(row)]
	last := (len(sc) - 1) * FP8Block
	t := last + (len(row)-last)&^15
	encodeE4M3Scalar(codes[t:], row[t:], sc[len(sc)-1])
	if t > 0 {
		_ = sc[(t-1)/FP8Block]
		encodeE4M3RowAsm(&codes[0], &row[0], &sc[0], t)
	}
}

// errLanesFP8Asm is errLanesFP8AVX512 with the decode inside the sums (fp8ChunkAsm): no
// buffer between them, a row's chunk of up to maxChunk elements per call. It takes slabs whose
// rows and blocks are a multiple of 16 columns wide; the others go to errLanesFP8AVX512.
func errLanesFP8Asm(a *errAcc, ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) {
	if a.n&7 != 0 || bw%16 != 0 || cols%16 != 0 || rows == 0 || cols == 0 {
		errLanesFP8AVX512(a, ref, codes, scale, rows, cols, bh, bw)
		return
	}
	var head [16]float32
	c0 := 0 // the first column of row 0 the chunks take
	if a.n < 8 {
		// The first eight elements through the scalar step, so that every lane has one
		// (scalar code, while the upper halves are clean); the next eight through pairsChunk.
		decodeE4M3Scalar(head[:], codes[:16], scale[0])
		for i := range 8 {
			a.add(ref[i], head[i])
		}
		c0 = 16
	}
	var s sums512
	a.load512(&s)
	if c0 > 0 {
		s.pairsChunk(ref[8:16], head[8:])
		a.endChunk(&s, 8)
	}
	sc := ceilDiv(cols, bw)
	for r := range rows {
		srow := scale[(r/bh)*sc : (r/bh+1)*sc]
		x, c := ref[r*cols:(r+1)*cols], codes[r*cols:(r+1)*cols]
		for ; c0 < cols; c0 += maxChunk {
			n := min(maxChunk, cols-c0)
			bj := c0 / bw
			_, _, _ = x[c0+n-1], c[c0+n-1], srow[(c0+n-1)/bw]
			fp8ChunkAsm(&s, &x[c0], &c[c0], n, &srow[bj], (bj+1)*bw-c0, bw)
			a.endChunk(&s, n)
		}
		c0 = 0
	}
	a.save512(&s)
	archsimd.ClearAVXUpperBits()
}
