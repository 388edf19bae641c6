//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"pdq/safetensors"
)

// DecodeDense decodes little-endian BF16 or F16 elements of src into dst on the GPU, with the
// exact results of safetensors.DecodeFloat32 (NaN payloads included). F32 is a plain copy and
// stays on the host.
func (b *Backend) DecodeDense(dst []float32, src []byte, dt safetensors.DType) error {
	var fn cu.Function
	switch dt {
	case safetensors.BF16:
		fn = b.fn.decodeBF16
	case safetensors.F16:
		fn = b.fn.decodeF16
	default:
		return safetensors.DecodeFloat32(dst, src, dt)
	}
	if len(src) != 2*len(dst) {
		return fmt.Errorf("cuda: decode %s: %d bytes for %d elements", dt, len(src), len(dst))
	}
	n := len(dst)
	if n == 0 {
		return nil
	}
	const chunk = chunkBytes / 4
	return b.run(job{
		chunks: ceilDiv(n, chunk),
		sizes: func(i int) (int, int) {
			m := min(n, (i+1)*chunk) - i*chunk
			return 2 * m, 4 * m
		},
		stage: func(i int, in []byte) {
			copy(in, src[2*i*chunk:2*min(n, (i+1)*chunk)])
		},
		launch: func(i int, s cu.Stream, din, dout cu.DevicePtr) error {
			m := min(n, (i+1)*chunk) - i*chunk
			const threads = 256
			return launch(fn, b.grid(m, threads), 1, threads, s, uint64(dout), uint64(din), uint64(m))
		},
		finish: func(i int, o []byte) error {
			copy(f32Bytes(dst[i*chunk:min(n, (i+1)*chunk)]), o)
			return nil
		},
	})
}
