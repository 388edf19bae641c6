package kernels

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

// TestDecodeDense: each dense type widens element by element as floatcodec does (the bits of
// NaN payloads included), the others and wrong lengths are refused with their sentinels.
func TestDecodeDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1<<16 + 37
	for _, c := range []struct {
		dt   DType
		name string
		one  func(b []byte) float32
	}{
		{BF16, "BF16", func(b []byte) float32 { return floatcodec.BF16ToFloat32(binary.LittleEndian.Uint16(b)) }},
		{F16, "F16", func(b []byte) float32 { return floatcodec.F16ToFloat32(binary.LittleEndian.Uint16(b)) }},
		{F32, "F32", func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }},
	} {
		if c.dt.String() != c.name {
			t.Errorf("%v: String %q, want %q", uint8(c.dt), c.dt.String(), c.name)
		}
		w := c.dt.Size()
		src := make([]byte, n*w)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		for i := range 1 << 16 { // every 16-bit code once
			binary.LittleEndian.PutUint16(src[w*i:], uint16(i))
		}
		dst := make([]float32, n)
		if err := DecodeDense(dst, src, c.dt); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, v := range dst {
			if want := c.one(src[w*i:]); math.Float32bits(v) != math.Float32bits(want) {
				t.Fatalf("%s element %d: %#x, want %#x", c.name, i, math.Float32bits(v), math.Float32bits(want))
			}
		}
		if err := DecodeDense(dst[:3], src[:3*w+1], c.dt); !errors.Is(err, ErrShape) {
			t.Errorf("%s with one byte too many: %v, want ErrShape", c.name, err)
		}
	}
	for _, dt := range []DType{0, F8E4M3, F8E4M3 + 1} {
		if err := DecodeDense(make([]float32, 4), make([]byte, 8), dt); !errors.Is(err, ErrDType) {
			t.Errorf("%s: %v, want ErrDType", dt, err)
		}
	}
	if F8E4M3.String() != "F8_E4M3" || F8E4M3.Size() != 1 || DType(0).Size() != 0 {
		t.Errorf("F8E4M3: %q size %d; zero size %d", F8E4M3, F8E4M3.Size(), DType(0).Size())
	}
}
