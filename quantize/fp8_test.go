package quantize

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"pdq/safetensors"
)

func mustFP8(t testing.TB, w []float32, rows, cols, workers int) *FP8Result {
	t.Helper()
	r, err := QuantizeFP8Block(context.Background(), w, rows, cols, FP8Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFP8AllCodes: a block holding every finite e4m3 value times 2^-10 has absmax 448·2^-10, so
// its scale is exactly 2^-10 and every code must come back unchanged (0x80, -0, included);
// dequantizing gives the values back exactly. The NaN codes 0x7F and 0xFF have no finite value
// to start from: non-finite input is refused instead (TestInt4RefusesNonFinite).
func TestFP8AllCodes(t *testing.T) {
	const rows, cols = 2, 128
	w := make([]float32, rows*cols)
	for c := range 256 {
		w[c] = safetensors.F8E4M3ToFloat32(uint8(c)) * 0x1p-10
	}
	w[0x7f], w[0xff] = 0, 0
	r := mustFP8(t, w, rows, cols, 1)
	if len(r.ScaleInv) != 1 || r.ScaleInv[0] != 0x1p-10 {
		t.Fatalf("scale %v, want 2^-10", r.ScaleInv)
	}
	for c := range 256 {
		if c == 0x7f || c == 0xff {
			continue
		}
		if r.Data[c] != uint8(c) {
			t.Fatalf("code %#02x came back as %#02x", c, r.Data[c])
		}
	}
	got := make([]float32, rows*cols)
	if err := DequantizeFP8Block(got, r.Data, r.ScaleInv, rows, cols); err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if got[i] != w[i] || math.Signbit(float64(got[i])) != math.Signbit(float64(w[i])) {
			t.Fatalf("element %d: %v != %v", i, got[i], w[i])
		}
	}
}

// TestFP8Blocks: edge blocks use only their real elements, an all-zero block stores scale 1 and
// zero codes, and the scale is absmax/448 in float32.
func TestFP8Blocks(t *testing.T) {
	const rows, cols = 300, 200
	w := randWeights(20, rows*cols, true)
	for r := range 128 { // block (0,1) all zero
		clear(w[r*cols+128 : r*cols+200])
	}
	w[299*cols+199] = 5 // the only large value lies in the corner edge block (2,1)
	res := mustFP8(t, w, rows, cols, 1)
	if len(res.ScaleInv) != 3*2 {
		t.Fatalf("%d scales", len(res.ScaleInv))
	}
	if res.ScaleInv[1] != 1 {
		t.Errorf("all-zero block scale %v, want 1", res.ScaleInv[1])
	}
	for bi := range 3 {
		for bj := range 2 {
			var a float32
			for r := bi * 128; r < min(rows, bi*128+128); r++ {
				for c := bj * 128; c < min(cols, bj*128+128); c++ {
					a = max(a, float32(math.Abs(float64(w[r*cols+c]))))
				}
			}
			want := a / 448
			if a == 0 {
				want = 1
			}
			if got := res.ScaleInv[bi*2+bj]; got != want {
				t.Errorf("block (%d,%d) scale %v, want %v", bi, bj, got, want)
			}
		}
	}
	if res.ScaleInv[5] != 5.0/448 {
		t.Errorf("edge block scale %v", res.ScaleInv[5])
	}
	got := make([]float32, rows*cols)
	if err := DequantizeFP8Block(got, res.Data, res.ScaleInv, rows, cols); err != nil {
		t.Fatal(err)
	}
	var m Metrics
	m.Add(w, got, 0)
	for r := range 128 {
		for c := 128; c < cols; c++ {
			if got[r*cols+c] != 0 {
				t.Fatalf("zero block dequantized to %v", got[r*cols+c])
			}
		}
	}
	if s := m.SQNR(); s < 28 || math.IsNaN(s) {
		t.Errorf("SQNR %v", s)
	}
	// every code is the e4m3 rounding of x/scale
	for i, x := range w {
		s := res.ScaleInv[(i/cols/128)*2+(i%cols)/128]
		if c := safetensors.Float32ToF8E4M3(x / s); c != res.Data[i] {
			t.Fatalf("element %d: code %#x, want %#x", i, res.Data[i], c)
		}
	}
}

// TestFP8WorkersAndSlabs: identical bytes for any worker count, and slabs starting on multiples
// of 128 rows give the rows of the whole.
func TestFP8WorkersAndSlabs(t *testing.T) {
	const rows, cols = 600, 130
	w := randWeights(21, rows*cols, false)
	whole := mustFP8(t, w, rows, cols, 1)
	for _, n := range []int{2, 3, 0} {
		r := mustFP8(t, w, rows, cols, n)
		if !bytes.Equal(r.Data, whole.Data) || !equalF32(r.ScaleInv, whole.ScaleInv) {
			t.Fatalf("%d workers differ", n)
		}
	}
	var data []byte
	var scales []float32
	for _, cut := range [][2]int{{0, 128}, {128, 384}, {384, 600}} {
		r := mustFP8(t, w[cut[0]*cols:cut[1]*cols], cut[1]-cut[0], cols, 2)
		data = append(data, r.Data...)
		scales = append(scales, r.ScaleInv...)
	}
	if !bytes.Equal(data, whole.Data) || !equalF32(scales, whole.ScaleInv) {
		t.Fatal("slabs differ from the whole")
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestFP8Errors(t *testing.T) {
	if _, err := QuantizeFP8Block(context.Background(), make([]float32, 5), 2, 3, FP8Options{Workers: 1}); !errors.Is(err, ErrBadShape) {
		t.Errorf("short source: %v", err)
	}
	if err := DequantizeFP8Block(make([]float32, 6), make([]byte, 6), make([]float32, 2), 2, 3); !errors.Is(err, ErrBadShape) {
		t.Errorf("too many scales: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := QuantizeFP8Block(ctx, make([]float32, 256*4), 256, 4, FP8Options{Workers: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := QuantizeInt4(ctx, make([]float32, 256*32), 256, 32, Int4Options{GroupSize: 32}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled INT4: %v", err)
	}
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}
