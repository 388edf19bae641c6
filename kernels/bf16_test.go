package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestBF16Codecs: under every loop set, DecodeBF16 gives the scalar bits for all 65,536 codes
// and EncodeBF16 the scalar bits for every 4093rd float32 pattern plus the special values, at
// lengths that leave every tail size.
func TestBF16Codecs(t *testing.T) {
	codes := make([]byte, 2*65536)
	for c := range 65536 {
		binary.LittleEndian.PutUint16(codes[2*c:], uint16(c))
	}
	want := make([]float32, 65536)
	decodeBF16Scalar(want, codes)
	var vals []float32
	for b := uint64(0); b < 1<<32; b += 4093 {
		vals = append(vals, math.Float32frombits(uint32(b)))
	}
	for _, b := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0xff800001,
		0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x00000001, 0x00008000, 0x00018000, 0x3f808000, 0x3f818000} {
		vals = append(vals, math.Float32frombits(b))
	}
	wantEnc := make([]byte, 2*len(vals))
	encodeBF16Scalar(wantEnc, vals)
	for _, set := range loopSets {
		prev, _ := SetSIMD(set.name)
		got := make([]float32, 65536)
		DecodeBF16(got, codes)
		for c := range got {
			if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
				t.Fatalf("%s: decode %#04x: %#08x, want %#08x", set.name, c, math.Float32bits(got[c]), math.Float32bits(want[c]))
			}
		}
		enc := make([]byte, 2*len(vals))
		EncodeBF16(enc, vals)
		if i := firstDiff(enc, wantEnc); i >= 0 {
			t.Fatalf("%s: encode %#08x: %#04x, want %#04x", set.name, math.Float32bits(vals[i/2]),
				binary.LittleEndian.Uint16(enc[i&^1:]), binary.LittleEndian.Uint16(wantEnc[i&^1:]))
		}
		for n := range 40 { // every tail length, at an odd start
			e := make([]byte, 2*n)
			EncodeBF16(e, vals[3:3+n])
			if !bytes.Equal(e, wantEnc[6:6+2*n]) {
				t.Fatalf("%s: encode of %d values differs", set.name, n)
			}
			d := make([]float32, n)
			DecodeBF16(d, codes[6:6+2*n])
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(want[3+i]) {
					t.Fatalf("%s: decode of %d values differs at %d", set.name, n, i)
				}
			}
		}
		SetSIMD(prev)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// BenchmarkBF16 measures the BF16 codecs convert runs on every dense BF16 weight it reads and
// every BF16 weight it writes: go test ./kernels -run '^$' -bench BF16 -cpu 1
func BenchmarkBF16(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	enc := make([]byte, 2*n)
	for _, set := range loopSets {
		b.Run("decode/"+set.name, func(b *testing.B) {
			prev, _ := SetSIMD(set.name)
			defer SetSIMD(prev)
			cpu0 := cpuTime()
			for b.Loop() {
				DecodeBF16(vals, enc)
			}
			perWeight(b, n, cpu0)
		})
		b.Run("encode/"+set.name, func(b *testing.B) {
			prev, _ := SetSIMD(set.name)
			defer SetSIMD(prev)
			cpu0 := cpuTime()
			for b.Loop() {
				EncodeBF16(enc, vals)
			}
			perWeight(b, n, cpu0)
		})
	}
}
