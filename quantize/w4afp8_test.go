package quantize

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"pdq/internal/floatcodec"
)

func TestCheckW4AFP8(t *testing.T) {
	cases := []struct {
		hidden, inter int
		ok            bool
	}{
		{7168, 2048 / 8, true},   // DeepSeek-V3 / Kimi K2 experts at TP8
		{7168, 2048 / 16, false}, // TP16: 128 per rank
		{6144, 1536 / 8, false},  // 192 per rank
		{4096, 0, false},
		{7000, 256, false},
	}
	for _, c := range cases {
		err := CheckW4AFP8Experts(c.hidden, c.inter)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrBadShape) {
			t.Errorf("CheckW4AFP8Experts(%d, %d) = %v, want ok %v", c.hidden, c.inter, err, c.ok)
		}
	}
	if err := CheckW4AFP8Linear(7168, 1536); err != nil {
		t.Errorf("7168×1536: %v", err)
	}
	if err := CheckW4AFP8Linear(7168, 1600); !errors.Is(err, ErrBadShape) {
		t.Errorf("7168×1600: %v", err)
	}
}

// w4afp8Row packs one row of levels (-8..7) in pdq's layout and its BF16 scales.
func w4afp8Row(levels []int, scales []float32) (packed, sc []byte) {
	packed = make([]byte, len(levels)/2)
	for i, q := range levels {
		packed[i/2] |= byte(q+8) << (4 * (i % 2))
	}
	sc = make([]byte, 2*len(scales))
	for k, s := range scales {
		binary.LittleEndian.PutUint16(sc[2*k:], floatcodec.Float32ToBF16(s))
	}
	return packed, sc
}

// TestW4AFP8Dequantize: the weights are those of vLLM's load-time conversion and CUTLASS's
// e4m3 lookup table, derived here by hand, not q·s. The row's largest scale 0.875 makes
// c = 0.875/448 = 2^-9 and chan = 2^-6. In its group e = 448 and s8 = 56: the levels become
// e4m3(q·56)·2^-6, and e4m3 rounds 3·56 = 168 to 160 (a tie, to the even mantissa),
// 5·56 = 280 to 288, 6·56 = 336 to 320 (a tie), 7·56 = 392 to 384: level 7 weighs 6, not
// 7·0.875 = 6.125. A group of scale 2^-6 has e = 8 and s8 = 1 and keeps q·s exactly.
func TestW4AFP8Dequantize(t *testing.T) {
	const g = W4AFP8GroupSize
	levels := make([]int, 2*g)
	for i := range levels {
		levels[i] = i%16 - 8
	}
	packed, sc := w4afp8Row(levels, []float32{0.875, 1.0 / 64})
	got := make([]float32, 2*g)
	if err := W4AFP8Dequantize(got, packed, sc, 1, 2*g); err != nil {
		t.Fatal(err)
	}
	const ch = 1.0 / 64
	lut := []float32{0, 56, 112, 160, 224, 288, 320, 384, 448} // e4m3(|q|·56)
	for i, q := range levels {
		var want float32
		if i < g {
			want = lut[max(q, -q)] * ch
			if q < 0 {
				want = -want
			}
		} else {
			want = float32(q) / 64
		}
		if got[i] != want {
			t.Fatalf("element %d (level %d): %v, want %v", i, q, got[i], want)
		}
	}
	// The row's scale is the largest |scale|: a negative scale gives the mirrored weights.
	neg, _ := w4afp8Row(levels, nil)
	_, nsc := w4afp8Row(nil, []float32{-0.875, 1.0 / 64})
	gotNeg := make([]float32, 2*g)
	if err := W4AFP8Dequantize(gotNeg, neg, nsc, 1, 2*g); err != nil {
		t.Fatal(err)
	}
	for i := range g {
		if gotNeg[i] != -got[i] {
			t.Fatalf("negative scale, element %d: %v, want %v", i, gotNeg[i], -got[i])
		}
	}
	// A zero row stays zero (the smallest per-token scale), a non-finite scale is refused, and
	// so are lengths that do not match.
	zero := make([]float32, g)
	_, zsc := w4afp8Row(nil, []float32{0})
	if err := W4AFP8Dequantize(zero, packed[:g/2], zsc, 1, g); err != nil || slices.ContainsFunc(zero, func(v float32) bool { return v != 0 }) {
		t.Fatalf("zero scales: %v %v", err, zero[:8])
	}
	_, bad := w4afp8Row(nil, []float32{float32(math.Inf(1)), 1})
	if err := W4AFP8Dequantize(got, packed, bad, 1, 2*g); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("infinite scale: %v", err)
	}
	if err := W4AFP8Dequantize(got[:g], packed, sc, 1, 2*g); !errors.Is(err, ErrBadShape) {
		t.Fatalf("short dst: %v", err)
	}
	if err := W4AFP8Dequantize(got[:200], packed[:100], sc, 2, 100); !errors.Is(err, ErrBadShape) {
		t.Fatalf("rows of 100 columns: %v", err)
	}
}

// TestW4AFP8Bands: with Int4Options.Weights W4AFP8Weights, Int4Bands writes the bytes it writes without it and
// measures the weights W4AFP8Dequantize gives (bit for bit, however the slab is cut), which are
// not the BF16 scales' figure; a group size other than 128 is refused.
func TestW4AFP8Bands(t *testing.T) {
	const rows, cols = 40, 512
	w := randWeights(7, rows*cols, true)
	plain := Int4Options{GroupSize: W4AFP8GroupSize, Workers: 1}
	eng := plain
	eng.Weights = W4AFP8Weights
	var want Int4Result
	var bf16M, wantM Metrics
	if err := QuantizeInt4Into(context.Background(), &want, w, rows, cols, plain); err != nil {
		t.Fatal(err)
	}
	if err := bf16M.AddInt4(w, &want, 5); err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, rows*cols)
	if err := W4AFP8Dequantize(deq, want.Packed, want.Scales, rows, cols); err != nil {
		t.Fatal(err)
	}
	var ms Measure
	ms.Add(w, deq)
	ms.MergeInto(&wantM, 5)
	if wantM == bf16M || wantM.SQNR() >= bf16M.SQNR() {
		t.Fatalf("engine weights measure %.3f dB, the BF16 scales %.3f dB: the conversion should cost", wantM.SQNR(), bf16M.SQNR())
	}
	for _, cuts := range [][]int{{0, rows}, {0, 1, 17, 40}, {0, 39, 40}} {
		var dst Int4Result
		var b Int4Bands
		var got Metrics
		if err := b.Begin(&dst, rows, cols, eng); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(cuts); i++ {
			if err := b.Add(context.Background(), w[cuts[i-1]*cols:cuts[i]*cols], cuts[i]-cuts[i-1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.End(&got, 5); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst.Packed, want.Packed) || !bytes.Equal(dst.Scales, want.Scales) {
			t.Fatalf("cuts %v: bytes differ from the plain INT4 g128 result", cuts)
		}
		if got != wantM {
			t.Fatalf("cuts %v: metrics %+v, want %+v", cuts, got, wantM)
		}
	}
	var b Int4Bands
	var dst Int4Result
	if err := b.Begin(&dst, rows, cols, Int4Options{GroupSize: 32, Weights: W4AFP8Weights}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("W4AFP8 with groups of 32: %v", err)
	}
}
