package kernels

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// goldenInput returns rows×cols weights from integer arithmetic only (splitmix64, sums of four
// uniforms, an occasional heavy tail), so the input itself is identical on every platform.
func goldenInput(rows, cols int) []float32 {
	x := make([]float32, rows*cols)
	state := uint64(0x9e3779b97f4a7c15)
	next := func() uint64 {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	for i := range x {
		var s int64
		for range 4 {
			s += int64(next() >> 44) // 20-bit uniforms
		}
		s -= 2 << 20
		if next()%64 == 0 {
			s *= int64(next()%16 + 1)
		}
		x[i] = float32(s) * 0x1p-26 // exact: |s| < 2^24
	}
	clear(x[cols : cols+64]) // a zero group
	return x
}

func hashOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func statsBytes(st []GroupStats) []byte {
	b := make([]byte, 0, 16*len(st))
	for _, s := range st {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(s.SumSq))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(s.Err))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(s.RTNErr))
		b = binary.LittleEndian.AppendUint32(b, uint32(s.Clipped))
	}
	return b
}

// TestGoldenHashes pins the exact output bytes of the specification. A change here changes what
// pdq writes and what every other backend must reproduce; update the hashes only on purpose.
func TestGoldenHashes(t *testing.T) {
	const rows, cols = 64, 512
	x := goldenInput(rows, cols)
	cases := []struct {
		name   string
		g      int
		search Search
		signed bool
		want   string
	}{
		{"rtn-g32", 32, SearchRTN, false, "e6cdbad84ee3bf09"},
		{"rtn-g128", 128, SearchRTN, false, "b873de49bba38037"},
		{"mse-g32", 32, SearchMSE, false, "e7bbc02ab094311f"},
		{"mse-g64", 64, SearchMSE, false, "4c866a193701d938"},
		{"mse-g128", 128, SearchMSE, false, "f7933a32c44a5338"},
		{"mse-channel", cols, SearchMSE, false, "ec8a9888b826f046"},
		{"mse-signed-g32", 32, SearchMSE, true, "7dd7b8f0c5519723"},
	}
	for _, c := range cases {
		out := quant(t, x, rows, cols, mustParams(t, c.g, c.search, c.signed))
		if got := hashOf(out.Packed, out.Scales, statsBytes(out.Stats)); got != c.want {
			t.Errorf("%s: output hash %s, want %s", c.name, got, c.want)
		}
	}
	codes, scales := make([]byte, rows*cols), make([]float32, 4)
	if err := (CPU{}).QuantizeFP8Block(codes, scales, x, rows, cols); err != nil {
		t.Fatal(err)
	}
	sb := make([]byte, 0, 16)
	for _, s := range scales {
		sb = binary.LittleEndian.AppendUint32(sb, math.Float32bits(s))
	}
	if got, want := hashOf(codes, sb), "402356e6771676f8"; got != want {
		t.Errorf("fp8-block: output hash %s, want %s", got, want)
	}
}
