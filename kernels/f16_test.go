package kernels

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

// TestF16Decode: under every loop set, DecodeF16 gives floatcodec's bits for all 65,536 codes
// (zeros, subnormals, the largest finite values, infinities and NaN payloads among them), at
// every tail length from an odd start.
func TestF16Decode(t *testing.T) {
	codes, want := allCodes16(func(dst []float32, src []byte) {
		for c := range dst {
			dst[c] = floatcodec.F16ToFloat32(binary.LittleEndian.Uint16(src[2*c:]))
		}
	})
	for _, set := range loopSets {
		prev, _ := SetSIMD(set.name)
		checkDecode16(t, set.name, DecodeF16, codes, want)
		SetSIMD(prev)
	}
}

// BenchmarkF16 measures the decode convert runs on every dense F16 weight it reads:
// go test ./kernels -run '^$' -bench F16 -cpu 1
func BenchmarkF16(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, n)
	enc := make([]byte, 2*n)
	for i := range vals {
		binary.LittleEndian.PutUint16(enc[2*i:], floatcodec.Float32ToF16(float32(r.NormFloat64())))
	}
	for _, set := range loopSets {
		benchLoop(b, "decode", set.name, n, func() { DecodeF16(vals, enc) })
	}
}
