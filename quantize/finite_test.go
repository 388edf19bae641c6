package quantize

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pdq/safetensors"
)

// finiteDTypes are the dtypes FirstNonFiniteRaw reads, with their element widths.
var finiteDTypes = []struct {
	dt    safetensors.DType
	width int
}{
	{safetensors.BF16, 2}, {safetensors.F16, 2}, {safetensors.F32, 4},
	{safetensors.F8E4M3, 1}, {safetensors.F8E5M2, 1},
}

// firstNonFiniteDecoded is the reference: decode src and look at the float32 values.
func firstNonFiniteDecoded(t testing.TB, src []byte, dt safetensors.DType) int {
	n := len(src) * 8 / dt.Bits()
	v := make([]float32, n)
	if err := decodeFloat32(v, src[:n*dt.Bits()/8], dt); err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}

// checkRaw compares FirstNonFiniteRaw with decoding on src.
func checkRaw(t testing.TB, src []byte, dt safetensors.DType) {
	got, ok := FirstNonFiniteRaw(src, dt)
	if want := firstNonFiniteDecoded(t, src, dt); !ok || got != want {
		t.Fatalf("%s, %d bytes: FirstNonFiniteRaw = %d, %v; decoded, the first non-finite is %d", dt, len(src), got, ok, want)
	}
}

// TestFirstNonFiniteRawEveryPattern puts every bit pattern of the narrow dtypes (every one of the
// 65536 BF16 and F16 values, the 256 FP8 codes) at every kind of position (inside a block of eight
// words, in the word loop, in the tail) among finite values, and special F32 patterns too.
func TestFirstNonFiniteRawEveryPattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range finiteDTypes {
		patterns := 1 << (8 * d.width)
		if d.width == 4 {
			patterns = 0
		}
		specials := []uint64{}
		switch d.dt {
		case safetensors.F32:
			for _, b := range []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff, 0x7f7fffff, 0x00800000, 0x80000000, 0x3f800000} {
				specials = append(specials, uint64(b))
			}
		}
		for p := range patterns {
			specials = append(specials, uint64(p))
		}
		for k, p := range specials {
			n := 1 + (k*7)%70 // elements, so the lengths cover blocks, words and tails
			src := finiteRaw(rng, d.dt, d.width, n, k%2 == 1)
			at := (k * 13) % n
			// Every third buffer has the pattern again in the same lane of the next word, where
			// the sums of two words would meet.
			for i := at; i < n && i <= at+8/d.width; i += 8 / d.width {
				for b := range d.width {
					src[i*d.width+b] = byte(p >> (8 * b))
				}
				if k%3 != 0 {
					break
				}
			}
			checkRaw(t, src, d.dt)
		}
		for n := range 80 { // none at all, every length
			checkRaw(t, finiteRaw(rng, d.dt, d.width, n, n%2 == 1), d.dt)
		}
	}
	for _, dt := range []safetensors.DType{safetensors.I32, safetensors.F64} {
		if _, ok := FirstNonFiniteRaw(make([]byte, 8), dt); ok {
			t.Errorf("FirstNonFiniteRaw claims to read %s", dt)
		}
	}
}

// finiteRaw returns n random finite values of dt, encoded; edge: each one bit away from
// non-finite (every bit of the exponent set but one), the values a carry between lanes would
// turn into a false alarm or hide a true one behind.
func finiteRaw(rng *rand.Rand, dt safetensors.DType, width, n int, edge bool) []byte {
	_, mask, _ := nonFiniteBits(dt)
	var maskBits []uint64
	for b := range 8 * width {
		if mask>>b&1 == 1 {
			maskBits = append(maskBits, uint64(1)<<b)
		}
	}
	src := make([]byte, n*width)
	for i := range n {
		v := rng.Uint64()
		if edge {
			v |= mask
		}
		if v&mask == mask {
			v &^= maskBits[rng.IntN(len(maskBits))]
		}
		for b := range width {
			src[i*width+b] = byte(v >> (8 * b))
		}
	}
	return src
}

// TestCheckFiniteRaw: the error names the tensor, the element's index counted from base and its
// value, and wraps ErrNonFinite.
func TestCheckFiniteRaw(t *testing.T) {
	src := make([]byte, 2*100)
	binary.LittleEndian.PutUint16(src[2*37:], 0xff80) // BF16 -Inf
	err := CheckFiniteRaw("w", src, safetensors.BF16, 1000)
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), `tensor "w": element 1037 is -Inf`) {
		t.Errorf("got %v, want ErrNonFinite at element 1037, -Inf", err)
	}
	if err := CheckFiniteRaw("w", make([]byte, 200), safetensors.BF16, 0); err != nil {
		t.Errorf("zeros: %v", err)
	}
	if err := CheckFiniteRaw("w", make([]byte, 8), safetensors.I32, 0); err == nil {
		t.Error("an integer dtype passed the finiteness check")
	}
	// F64 is decoded, so a finite value too large for float32 fails as it does decoded; the
	// second chunk of the decoding is reached.
	for _, c := range []struct {
		bits uint64
		want string
	}{{math.Float64bits(1e300), "element 300 is +Inf"}, {math.Float64bits(math.NaN()), "element 300 is NaN"}, {math.Float64bits(-2), ""}} {
		f64 := make([]byte, 8*400)
		binary.LittleEndian.PutUint64(f64[8*300:], c.bits)
		err := CheckFiniteRaw("w", f64, safetensors.F64, 0)
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("F64 %#x: got %v, want %q", c.bits, err, c.want)
		}
	}
}

// FuzzFirstNonFiniteRaw compares the bit test with decoding on any bytes.
func FuzzFirstNonFiniteRaw(f *testing.F) {
	f.Add([]byte{0x80, 0x7f, 0, 0}, uint8(0))
	f.Add(make([]byte, 40), uint8(3))
	f.Fuzz(func(t *testing.T, src []byte, which uint8) {
		d := finiteDTypes[int(which)%len(finiteDTypes)]
		checkRaw(t, src[:len(src)/d.width*d.width], d.dt)
	})
}

// BenchmarkFirstNonFiniteRaw is the check of a copied BF16 tensor, against decoding it and
// checking the float32 values as convert did before.
func BenchmarkFirstNonFiniteRaw(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := finiteRaw(rng, safetensors.BF16, 2, 1<<20, false)
	b.Run("bits", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if i, _ := FirstNonFiniteRaw(src, safetensors.BF16); i >= 0 {
				b.Fatal(i)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		v := make([]float32, len(src)/2)
		for b.Loop() {
			if err := decodeFloat32(v, src, safetensors.BF16); err != nil {
				b.Fatal(err)
			}
			if err := CheckFinite("w", v, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
