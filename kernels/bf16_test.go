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
	codes, want := allCodes16(decodeBF16Scalar)
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
		checkDecode16(t, set.name, DecodeBF16, codes, want)
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
		}
		SetSIMD(prev)
	}
}

// allCodes16 returns the 65,536 little-endian 16-bit codes in order and their decoding by the
// scalar loop decode.
func allCodes16(decode func([]float32, []byte)) ([]byte, []float32) {
	codes := make([]byte, 2*65536)
	for c := range 65536 {
		binary.LittleEndian.PutUint16(codes[2*c:], uint16(c))
	}
	want := make([]float32, 65536)
	decode(want, codes)
	return codes, want
}

// checkDecode16 fails unless decode gives want's bits for every code of codes (allCodes16), and
// for every tail length from an odd start.
func checkDecode16(t *testing.T, set string, decode func([]float32, []byte), codes []byte, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	decode(got, codes)
	for c := range got {
		if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
			t.Fatalf("%s: decode %#04x: %#08x, want %#08x", set, c, math.Float32bits(got[c]), math.Float32bits(want[c]))
		}
	}
	for n := range 40 {
		d := make([]float32, n)
		decode(d, codes[6:6+2*n])
		for i := range d {
			if math.Float32bits(d[i]) != math.Float32bits(want[3+i]) {
				t.Fatalf("%s: decode of %d values differs at %d", set, n, i)
			}
		}
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
		benchLoop(b, "decode", set.name, n, func() { DecodeBF16(vals, enc) })
		benchLoop(b, "encode", set.name, n, func() { EncodeBF16(enc, vals) })
	}
}

// benchLoop runs op, which handles n weights, as the sub-benchmark name/set under loop set set.
func benchLoop(b *testing.B, name, set string, n int, op func()) {
	b.Run(name+"/"+set, func(b *testing.B) {
		prev, _ := SetSIMD(set)
		defer SetSIMD(prev)
		cpu0 := cpuTime()
		for b.Loop() {
			op()
		}
		perWeight(b, n, cpu0)
	})
}
