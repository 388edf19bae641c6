//go:build cuda || cudaemu

package host

import (
	"fmt"

	"pdq/kernels"
)

// DecodeDense decodes little-endian BF16 or F16 elements of src into dst on the GPU, with the
// exact results of kernels.DecodeDense (NaN payloads included). F32 is a plain copy and stays
// on the host; other types are refused as kernels.DecodeDense refuses them.
func (o Ops) DecodeDense(dst []float32, src []byte, dt kernels.DType) error {
	var k Kernel
	switch dt {
	case kernels.BF16:
		k = DecodeBF16
	case kernels.F16:
		k = DecodeF16
	default:
		return kernels.DecodeDense(dst, src, dt)
	}
	if len(src) != 2*len(dst) {
		return fmt.Errorf("cuda: decode %s: %d bytes for %d elements", dt, len(src), len(dst))
	}
	n := len(dst)
	if n == 0 {
		return nil
	}
	const chunk = ChunkBytes / 4
	return o.R.Run(Job{
		Chunks: ceilDiv(n, chunk),
		Sizes: func(i int) (int, int) {
			m := min(n, (i+1)*chunk) - i*chunk
			return 2 * m, 4 * m
		},
		Stage: func(i int, in []byte) {
			copy(in, src[2*i*chunk:2*min(n, (i+1)*chunk)])
		},
		Launch: func(i int, s Stream, din, dout uint64) error {
			m := min(n, (i+1)*chunk) - i*chunk
			const threads = 256
			return s.Launch(k, o.R.Grid(m, threads), 1, threads, dout, din, uint64(m))
		},
		Finish: func(i int, o []byte) error {
			copy(f32Bytes(dst[i*chunk:min(n, (i+1)*chunk)]), o)
			return nil
		},
	})
}
