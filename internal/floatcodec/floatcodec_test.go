package floatcodec

import (
	"math"
	"testing"
)

// TestRoundTrips: every bf16, binary16 and FP8 pattern that is not NaN decodes to a float32
// that encodes back to the same pattern (the formats' values are exact in float32).
func TestRoundTrips(t *testing.T) {
	for h := range 1 << 16 {
		if f := BF16ToFloat32(uint16(h)); f == f && Float32ToBF16(f) != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, f, Float32ToBF16(f))
		}
		if f := F16ToFloat32(uint16(h)); f == f && Float32ToF16(f) != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, Float32ToF16(f))
		}
	}
	for c := range 256 {
		if f := F8E4M3ToFloat32(uint8(c)); f == f && Float32ToF8E4M3(f) != uint8(c) {
			t.Fatalf("e4m3 %#02x -> %v -> %#02x", c, f, Float32ToF8E4M3(f))
		}
		if f := F8E5M2ToFloat32(uint8(c)); f == f && Float32ToF8E5M2(f) != uint8(c) {
			t.Fatalf("e5m2 %#02x -> %v -> %#02x", c, f, Float32ToF8E5M2(f))
		}
	}
	if F8E4M3ToFloat32(0x7e) != 448 || Float32ToF8E4M3(1e9) != 0x7e || Float32ToF8E4M3(float32(math.Inf(-1))) != 0xfe {
		t.Error("e4m3 saturation")
	}
	if v := F8E4M3ToFloat32(0xff); math.Float32bits(v) != 0x7fc00000 {
		t.Errorf("e4m3 0xFF decodes to %#08x, want the positive quiet NaN 0x7fc00000", math.Float32bits(v))
	}
}
