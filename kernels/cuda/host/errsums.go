//go:build cuda || cudaemu

package host

import (
	"encoding/binary"
	"math"

	"pdq/kernels"
	"pdq/kernels/cuda/parity"
)

// ErrorSums implements kernels.Backend. The specification is an eight-lane float64 sum (lane
// i%8 in index order), which no GPU-wide reduction reproduces bit for bit, so this runs the CPU
// loop: the result is identical by construction. ErrorSumsChunked is the GPU version with its bound.
func (o Ops) ErrorSums(ref, got []float32, base int64) kernels.ErrSums {
	return kernels.CPU{}.ErrorSums(ref, got, base)
}

// ErrChunk is the number of consecutive elements one GPU thread sums in ErrorSumsChunked.
const ErrChunk = parity.ErrChunk

// ErrorSumsChunked computes the sums of kernels.CPU.ErrorSums on the GPU: each thread sums
// ErrChunk consecutive elements sequentially in float64 (no fused multiply-add), and the host
// adds the chunk sums in chunk order, also in float64. N, MaxAbsErr and MaxAbsIdx are exact.
// Every per-element term is computed exactly as on the CPU; only the grouping of the float64
// additions differs. The CPU's lane sum is within (n/8+2)·u·Σ|term| (below (n-1)·u·Σ|term|) of the exact sum and
// this one within (ErrChunk + n/ErrChunk)·u·Σ|term| (u = 2^-53, first order), so the two differ
// by at most parity.ErrSumsBound(n, Σ|term|): relative 10^-9 for a billion elements, far below any
// digit a report prints.
func (o Ops) ErrorSumsChunked(ref, got []float32, base int64) (kernels.ErrSums, error) {
	n := len(ref)
	s := kernels.ErrSums{N: int64(n), MaxAbsIdx: -1}
	got = got[:n]
	if n == 0 {
		return s, nil
	}
	const chunk = ChunkBytes / 4 // elements per pipeline chunk, a multiple of ErrChunk
	err := o.R.Run(Job{
		Chunks: ceilDiv(n, chunk),
		Sizes: func(i int) (int, int) {
			m := min(n, (i+1)*chunk) - i*chunk
			return 8 * m, 56 * ceilDiv(m, ErrChunk)
		},
		Stage: func(i int, in []byte) {
			i0, i1 := i*chunk, min(n, (i+1)*chunk)
			copy(in, f32Bytes(ref[i0:i1]))
			copy(in[4*(i1-i0):], f32Bytes(got[i0:i1]))
		},
		Launch: func(i int, st Stream, din, dout uint64) error {
			m := min(n, (i+1)*chunk) - i*chunk
			k := ceilDiv(m, ErrChunk)
			const threads = 128
			return st.Launch(ErrPartial, o.R.Grid(k, threads), 1, threads,
				dout, dout+uint64(48*k), din, din+uint64(4*m), uint64(m), ErrChunk)
		},
		Finish: func(i int, o []byte) error {
			m := min(n, (i+1)*chunk) - i*chunk
			k := ceilDiv(m, ErrChunk)
			for c := range k {
				f := func(j int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(o[48*c+8*j:])) }
				s.SumSqRef += f(0)
				s.SumSqErr += f(1)
				s.SumAbsErr += f(2)
				s.Dot += f(3)
				s.SumSqGot += f(4)
				if mx := f(5); mx > s.MaxAbsErr || s.MaxAbsIdx < 0 {
					idx := int64(binary.LittleEndian.Uint64(o[48*k+8*c:]))
					s.MaxAbsErr, s.MaxAbsIdx = mx, base+int64(i*chunk)+idx
				}
			}
			return nil
		},
	})
	return s, err
}
