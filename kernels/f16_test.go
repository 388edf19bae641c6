package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

// TestF16Decode: under every loop set, DecodeF16 gives floatcodec's bits for all 65,536 codes
// (zeros, subnormals, the largest finite values, infinities and NaN payloads among them), at
// every tail length from an odd start.
func TestF16Decode(t *testing.T) {
	codes := make([]byte, 2*65536)
	want := make([]float32, 65536)
	for c := range 65536 {
		binary.LittleEndian.PutUint16(codes[2*c:], uint16(c))
		want[c] = floatcodec.F16ToFloat32(uint16(c))
	}
	for _, set := range loopSets {
		prev, _ := SetSIMD(set.name)
		got := make([]float32, 65536)
		DecodeF16(got, codes)
		for c := range got {
			if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
				t.Fatalf("%s: decode %#04x: %#08x, want %#08x", set.name, c, math.Float32bits(got[c]), math.Float32bits(want[c]))
			}
		}
		for n := range 40 {
			d := make([]float32, n)
			DecodeF16(d, codes[6:6+2*n])
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(want[3+i]) {
					t.Fatalf("%s: decode of %d values differs at %d", set.name, n, i)
				}
			}
		}
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
		b.Run("decode/"+set.name, func(b *testing.B) {
			prev, _ := SetSIMD(set.name)
			defer SetSIMD(prev)
			cpu0 := cpuTime()
			for b.Loop() {
				DecodeF16(vals, enc)
			}
			perWeight(b, n, cpu0)
		})
	}
}
