//go:build cuda

package cuda

import (
	"encoding/binary"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"pdq/kernels"
)

const noBad = math.MaxUint64 // the kernels' "no non-finite element" marker

// statsSize is the size of kernels.GroupStats, which the kernel writes as it is laid out in Go.
const statsSize = int(unsafe.Sizeof(kernels.GroupStats{}))

// int4Layout is the chunk output: packed words, BF16 scales, stats, the non-finite marker.
type int4Layout struct{ packed, scales, stats, bad, total int }

func int4Out(n, ng int) int4Layout {
	var l int4Layout
	l.scales = n / 2
	l.stats = roundUp(l.scales+2*ng, 16)
	l.bad = l.stats + statsSize*ng
	l.total = l.bad + 8
	return l
}

// QuantizeInt4 implements kernels.Backend.
func (b *Backend) QuantizeInt4(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params) error {
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
	var mode uint64
	if p.Search == kernels.SearchMSE {
		mode = 1 | uint64(len(p.Pos))<<32 | uint64(len(p.Neg))<<48 | uint64(max(p.Refine, 0))<<16
		if p.Signed {
			mode |= 1 << 8
		}
	}
	fn := b.fn.int4Any
	switch g {
	case 32:
		fn = b.fn.int4G32
	case 64:
		fn = b.fn.int4G64
	}
	cr := rowsPerChunk(rows, 4*cols, 1)
	var bad error
	return b.run(job{
		chunks: ceilDiv(rows, cr),
		sizes: func(i int) (int, int) {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			return 4*m + 4*len(cand), int4Out(m, m/g).total
		},
		stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			m := (r1 - r0) * cols
			copy(in, f32Bytes(src[r0*cols:r1*cols]))
			copy(in[4*m:], f32Bytes(cand))
		},
		launch: func(i int, s cu.Stream, din, dout cu.DevicePtr) error {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			l := int4Out(m, m/g)
			if err := cu.MemsetD8Async(dout+cu.DevicePtr(l.bad), 0xff, 8, s); err != nil {
				return err
			}
			const threads = 128
			groups := m / g
			return launch(fn, b.grid(groups, threads), 1, threads, s,
				uint64(dout), uint64(dout)+uint64(l.scales), uint64(dout)+uint64(l.stats),
				uint64(dout)+uint64(l.bad), uint64(din), uint64(groups)|uint64(g)<<40, mode,
				uint64(din)+uint64(4*m))
		},
		finish: func(i int, o []byte) error {
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
		},
	})
}

// DequantizeInt4 implements kernels.Backend.
func (b *Backend) DequantizeInt4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	g := groupSize
	n := rows * cols
	if g <= 0 || g%8 != 0 || cols%g != 0 || rows < 0 || len(dst) != n || len(packed) != n/2 || len(scales) != n/g {
		return kernels.CPU{}.DequantizeInt4(dst, packed, scales, rows, cols, groupSize)
	}
	if n == 0 {
		return nil
	}
	cr := rowsPerChunk(rows, 4*cols, 1)
	return b.run(job{
		chunks: ceilDiv(rows, cr),
		sizes: func(i int) (int, int) {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			return m/2 + 4*(m/g), 4 * m
		},
		stage: func(i int, in []byte) {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			m := (r1 - r0) * cols
			copy(in, packed[r0*cols/2:r1*cols/2])
			copy(in[m/2:], f32Bytes(scales[r0*cols/g:r1*cols/g]))
		},
		launch: func(i int, s cu.Stream, din, dout cu.DevicePtr) error {
			m := (min(rows, (i+1)*cr) - i*cr) * cols
			const threads = 256
			return launch(b.fn.dequantInt4, b.grid(m/8, threads), 1, threads, s,
				uint64(dout), uint64(din), uint64(din)+uint64(m/2), uint64(m/8), uint64(g/8))
		},
		finish: func(i int, o []byte) error {
			r0, r1 := i*cr, min(rows, (i+1)*cr)
			copy(f32Bytes(dst[r0*cols:r1*cols]), o)
			return nil
		},
	})
}

// f32Bytes views a float32 slice as its little-endian bytes (the GPU and amd64/arm64 hosts are
// little-endian).
func f32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

func statsBytes(s []kernels.GroupStats) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), statsSize*len(s))
}
