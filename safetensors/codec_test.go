package safetensors

import (
	"math"
	"testing"
)

// TestBF16AllCodes: every BF16 code decodes and re-encodes to itself (NaNs stay NaN).
func TestBF16AllCodes(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToFloat32(h)
		got := Float32ToBF16(f)
		if f != f {
			if g := BF16ToFloat32(got); g == g {
				t.Fatalf("NaN code %#04x re-encoded to non-NaN %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Fatalf("BF16 %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

// TestBF16RoundNearestEven checks ties and carries against a float64 reference.
func TestBF16RoundNearestEven(t *testing.T) {
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f808000, 0x3f80}, // tie, even below
		{0x3f818000, 0x3f82}, // tie, odd below: up
		{0x3f808001, 0x3f81}, // just above tie
		{0x3f807fff, 0x3f80}, // just below tie
		{0x7f7fffff, 0x7f80}, // max float32 rounds to +inf
		{0xff7fffff, 0xff80},
		{0x00000001, 0x0000}, // tiny subnormal
		{0x80000000, 0x8000}, // -0
	}
	for _, c := range cases {
		if got := Float32ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// TestF16AllCodes: exact round trip of every binary16 code, and agreement of the decoder with
// the definition.
func TestF16AllCodes(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToFloat32(h)
		exp := int(h>>10) & 0x1f
		man := float64(h & 0x3ff)
		var want float64
		switch {
		case exp == 0:
			want = man * math.Ldexp(1, -24)
		case exp == 31 && man == 0:
			want = math.Inf(1)
		case exp == 31:
			want = math.NaN()
		default:
			want = (1 + man/1024) * math.Ldexp(1, exp-15)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if math.IsNaN(want) {
			if f == f {
				t.Fatalf("F16 %#04x: want NaN, got %v", h, f)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("F16 %#04x decodes to %v, want %v", h, f, want)
		}
		if got := Float32ToF16(f); got != h {
			t.Fatalf("F16 %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

// TestF16RoundingMidpoints: the midpoint between two adjacent F16 values rounds to the even one,
// and values a hair away from it round to the nearer one.
func TestF16RoundingMidpoints(t *testing.T) {
	for i := range 0x7bff { // positive finite codes with a finite successor
		lo, hi := F16ToFloat32(uint16(i)), F16ToFloat32(uint16(i+1))
		mid := (float64(lo) + float64(hi)) / 2
		if float64(float32(mid)) != mid {
			continue // midpoint not representable in float32 (never for F16, kept as a guard)
		}
		want := uint16(i)
		if i&1 == 1 {
			want = uint16(i + 1)
		}
		if got := Float32ToF16(float32(mid)); got != want {
			t.Fatalf("midpoint of %#04x/%#04x rounded to %#04x, want %#04x", i, i+1, got, want)
		}
		above := math.Nextafter32(float32(mid), float32(math.Inf(1)))
		if got := Float32ToF16(above); got != uint16(i+1) {
			t.Fatalf("just above midpoint of %#04x rounded to %#04x", i, got)
		}
		below := math.Nextafter32(float32(mid), 0)
		if got := Float32ToF16(below); got != uint16(i) {
			t.Fatalf("just below midpoint of %#04x rounded to %#04x", i, got)
		}
	}
	if got := Float32ToF16(65520); got != 0x7c00 {
		t.Errorf("65520 should overflow to inf, got %#04x", got)
	}
}

// TestF8E4M3AllCodes: the 256 codes decode to the e4m3fn definition and re-encode to themselves.
func TestF8E4M3AllCodes(t *testing.T) {
	for i := range 256 {
		c := uint8(i)
		f := F8E4M3ToFloat32(c)
		if c&0x7f == 0x7f {
			if f == f {
				t.Fatalf("code %#02x should be NaN, got %v", c, f)
			}
			if g := Float32ToF8E4M3(f); g&0x7f != 0x7f {
				t.Fatalf("NaN re-encoded to %#02x", g)
			}
			continue
		}
		exp, man := int(c>>3)&0xf, float64(c&7)
		want := (1 + man/8) * math.Ldexp(1, exp-7)
		if exp == 0 {
			want = man * math.Ldexp(1, -9)
		}
		if c&0x80 != 0 {
			want = -want
		}
		if float64(f) != want {
			t.Fatalf("code %#02x decodes to %v, want %v", c, f, want)
		}
		if got := Float32ToF8E4M3(f); got != c {
			t.Fatalf("code %#02x -> %v -> %#02x", c, f, got)
		}
	}
	if F8E4M3ToFloat32(0x7e) != 448 {
		t.Fatal("max code is not 448")
	}
}

// TestF8E4M3RoundingAndSaturation checks nearest-even between every pair of adjacent codes and
// saturation at ±448.
func TestF8E4M3RoundingAndSaturation(t *testing.T) {
	for i := range 0x7e {
		lo, hi := F8E4M3ToFloat32(uint8(i)), F8E4M3ToFloat32(uint8(i+1))
		mid := (lo + hi) / 2
		want := uint8(i)
		if i&1 == 1 {
			want = uint8(i + 1)
		}
		if got := Float32ToF8E4M3(mid); got != want {
			t.Fatalf("midpoint %v of %#02x/%#02x -> %#02x, want %#02x", mid, i, i+1, got, want)
		}
		if got := Float32ToF8E4M3(-mid); got != want|0x80 {
			t.Fatalf("-midpoint %v -> %#02x, want %#02x", -mid, got, want|0x80)
		}
		if got := Float32ToF8E4M3(math.Nextafter32(mid, 1000)); got != uint8(i+1) {
			t.Fatalf("just above midpoint %v -> %#02x", mid, got)
		}
	}
	for _, f := range []float32{448, 449, 464, 480, 1e6, float32(math.Inf(1))} {
		if got := Float32ToF8E4M3(f); got != 0x7e {
			t.Errorf("%v -> %#02x, want 0x7e (448)", f, got)
		}
		if got := Float32ToF8E4M3(-f); got != 0xfe {
			t.Errorf("%v -> %#02x, want 0xfe (-448)", -f, got)
		}
	}
	// Below the smallest subnormal (2^-9): half of it rounds to zero (tie to even).
	if got := Float32ToF8E4M3(float32(math.Ldexp(1, -10))); got != 0 {
		t.Errorf("2^-10 -> %#02x, want 0", got)
	}
}

// TestF8E5M2AllCodes: the 256 e5m2 codes round-trip (NaNs stay NaN).
func TestF8E5M2AllCodes(t *testing.T) {
	for i := range 256 {
		c := uint8(i)
		f := F8E5M2ToFloat32(c)
		if f != f {
			if g := F8E5M2ToFloat32(Float32ToF8E5M2(f)); g == g {
				t.Fatalf("NaN code %#02x lost", c)
			}
			continue
		}
		if f != F16ToFloat32(uint16(c)<<8) {
			t.Fatalf("code %#02x is not the top byte of binary16", c)
		}
		if got := Float32ToF8E5M2(f); got != c {
			t.Fatalf("code %#02x -> %v -> %#02x", c, f, got)
		}
	}
	if got := Float32ToF8E5M2(1e6); got != 0x7c {
		t.Errorf("1e6 -> %#02x, want +inf 0x7c", got)
	}
}

// TestBulkRoundTrip: encode then decode of every float dtype through the bulk helpers.
func TestBulkRoundTrip(t *testing.T) {
	src := []float32{0, 1, -2.5, 0.1, 448, -3e-5, 1e-3}
	for _, dt := range []DType{F32, F64, F16, BF16, F8E4M3, F8E5M2} {
		buf := make([]byte, len(src)*dt.Bits()/8)
		if err := EncodeFloat32(buf, src, dt); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(src))
		if err := DecodeFloat32(got, buf, dt); err != nil {
			t.Fatal(err)
		}
		for i, f := range src {
			var want float32
			switch dt {
			case F32, F64:
				want = f
			case F16:
				want = F16ToFloat32(Float32ToF16(f))
			case BF16:
				want = RoundBF16(f)
			case F8E4M3:
				want = F8E4M3ToFloat32(Float32ToF8E4M3(f))
			case F8E5M2:
				want = F8E5M2ToFloat32(Float32ToF8E5M2(f))
			}
			if got[i] != want {
				t.Errorf("%s: element %d: %v -> %v, want %v", dt, i, f, got[i], want)
			}
		}
	}
	if err := DecodeFloat32(make([]float32, 1), make([]byte, 4), I32); err == nil {
		t.Error("I32 decode should be refused")
	}
}

func BenchmarkDecodeBF16(b *testing.B) {
	const n = 1 << 20
	src := make([]byte, 2*n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]float32, n)
	b.SetBytes(2 * n)
	for b.Loop() {
		DecodeBF16(dst, src)
	}
}

func BenchmarkDecodeF8E4M3(b *testing.B) {
	const n = 1 << 20
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 13)
	}
	dst := make([]float32, n)
	b.SetBytes(n)
	for b.Loop() {
		DecodeF8E4M3(dst, src)
	}
}
