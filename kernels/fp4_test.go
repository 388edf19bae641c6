package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

var e2m1Grid = []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}

func TestE2M1CodeTable(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	cases := []struct {
		v    float32
		want uint8
	}{
		{0, 0}, {negZero, 8}, {0.1, 0}, {-0.1, 8},
		{0.25, 0}, {math.Nextafter32(0.25, 1), 1}, // tie to the even index (0), then above it
		{0.5, 1}, {0.75, 2}, {math.Nextafter32(0.75, 0), 1},
		{1.25, 2}, {math.Nextafter32(1.25, 2), 3}, {1.5, 3},
		{1.75, 4}, {2.5, 4}, {math.Nextafter32(2.5, 3), 5}, {3, 5},
		{3.5, 6}, {5, 6}, {math.Nextafter32(5, 6), 7}, {6, 7}, {1e30, 7},
		{-0.5, 9}, {-1.75, 12}, {-2.5, 12}, {-5, 14}, {-6, 15}, {-100, 15},
	}
	for _, c := range cases {
		if got := E2M1Code(c.v); got != c.want {
			t.Errorf("E2M1Code(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	for c := range uint8(16) {
		if got := E2M1Code(E2M1Value(c)); got != c {
			t.Errorf("E2M1Code(E2M1Value(%d) = %v) = %d", c, E2M1Value(c), got)
		}
	}
	if v := E2M1Value(8); v != 0 || !math.Signbit(float64(v)) {
		t.Errorf("code 8 decodes to %v, want -0", v)
	}
}

// TestE2M1CodeNearest checks E2M1Code against a plain search of the grid: the nearest value,
// ties to the even index, saturating at 6.
func TestE2M1CodeNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := float32(rng.Float64()*14 - 7)
		if rng.IntN(4) == 0 { // land on and next to midpoints
			m := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5}[rng.IntN(7)]
			v = math.Float32frombits(math.Float32bits(m) + uint32(rng.IntN(3)) - 1)
		}
		a := math.Abs(float64(v))
		best := 0
		for i, g := range e2m1Grid {
			d, bd := math.Abs(a-g), math.Abs(a-e2m1Grid[best])
			if d < bd || d == bd && i%2 == 0 {
				best = i
			}
		}
		want := uint8(best)
		if math.Signbit(float64(v)) {
			want |= 8
		}
		if got := E2M1Code(v); got != want {
			t.Fatalf("E2M1Code(%v) = %d, want %d", v, got, want)
		}
	}
}

// TestFP4EncodeRoundsBF16First: the quantizers round the ratio to BF16 before the grid, as
// compressed-tensors does; a ratio just above a midpoint can fall back onto it.
func TestFP4EncodeRoundsBF16First(t *testing.T) {
	r := float32(0.25 + 0x1p-12) // rounds to 0.25 in BF16, a tie that goes to 0
	if E2M1Code(r) != 1 || fp4Encode(r) != 0 {
		t.Fatalf("E2M1Code %d, fp4Encode %d; want 1 and 0", E2M1Code(r), fp4Encode(r))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		v := math.Float32frombits(rng.Uint32())
		if v != v || math.IsInf(float64(v), 0) {
			continue
		}
		if got, want := fp4Encode(v), E2M1Code(floatcodec.RoundBF16(v)); got != want {
			t.Fatalf("fp4Encode(%v) = %d, want %d", v, got, want)
		}
	}
}

func TestNVFP4GlobalScale(t *testing.T) {
	cases := []struct{ amax, want float32 }{
		{1, 2688},
		{1.3125, 2048},
		{-1.3125, 2048},
		// 0.02 is 0.02001953125 in BF16; 2688 over it is 134268.3, 134144 in BF16.
		{0.02, 134144},
		{0, 2688 * 0x1p64}, // clamped to 2^-64
		{1e30, 2688 * 0x1p-64},
	}
	for _, c := range cases {
		if got := NVFP4GlobalScale(c.amax); got != c.want {
			t.Errorf("NVFP4GlobalScale(%v) = %v, want %v", c.amax, got, c.want)
		}
	}
}

func TestMXFP4RTNCode(t *testing.T) {
	cases := []struct {
		amax float32
		want uint8
	}{
		{0, 0}, {1e-45, 0}, {0x1p-126, 0}, {0x1p-125, 0}, {0x1p-124, 1},
		{0.75, 124},                      // 1.5·2^-1: scale 2^-3, the extreme at 6
		{1, 125},                         // scale 1/4, the extreme at 4
		{math.Nextafter32(1.75, 0), 125}, // below 1.75: rounded down, the extreme near 7 clips to 6
		{1.75, 126},                      // rounded up: scale 1/2, the extreme at 3.5
		{6, 127},                         // scale 1
		{7, 128},                         // 1.75·4: scale 2
		{math.MaxFloat32, 253},
	}
	for _, c := range cases {
		if got := mxfp4RTNCode(math.Float32bits(c.amax)); got != c.want {
			t.Errorf("mxfp4RTNCode(%v) = %d, want %d", c.amax, got, c.want)
		}
	}
	if MXFP4Scale(0) != 0x1p-127 || MXFP4Scale(127) != 1 || MXFP4Scale(124) != 0.125 || !math.IsInf(float64(MXFP4Scale(255)), 1) {
		t.Errorf("MXFP4Scale: %v %v %v %v", MXFP4Scale(0), MXFP4Scale(127), MXFP4Scale(124), MXFP4Scale(255))
	}
}

// handGroup is a group whose RTN scale is exactly 0.125 under both formats (NVFP4 with global
// scale 2048, MXFP4), so every ratio is exact: 8x. Its codes and error are worked out by hand.
var (
	handGroup = []float32{0.75, -0.75, 0.03125, 0.0625, 0.09375, 0.15625, 0.21875, 0.3125,
		0.4375, 0.625, 0.6875, -0.03125, 0, -0.5, 0.1875, 0.375}
	// ratios 6, -6, 0.25, 0.5, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 5.5, -0.25, 0, -4, 1.5, 3
	// codes  7, 15,  0,    1,   2,    2,    4,    4,   6,   6, 7,   8,     0, 14, 3,   5
	handPacked = []byte{0xF7, 0x10, 0x22, 0x44, 0x66, 0x87, 0xE0, 0x53}
	// 5·(1/32)² + 3·(1/16)² + (1/8)²
	handErr = float32(0.0322265625)
)

func TestNVFP4RTNHand(t *testing.T) {
	g := NVFP4GlobalScale(1.3125)
	out := newFP4Out(1, 16, 16)
	if err := QuantizeNVFP4(out, handGroup, 1, 16, g, SearchRTN); err != nil {
		t.Fatal(err)
	}
	// bf16(0.75/6) = 0.125; 2048·0.125 = 256 = 2^8: e4m3 exponent field 15, code 0x78.
	if out.Scales[0] != 0x78 || NVFP4Scale(0x78, g) != 0.125 {
		t.Fatalf("scale code %#x (%v), want 0x78 (0.125)", out.Scales[0], NVFP4Scale(out.Scales[0], g))
	}
	if string(out.Packed) != string(handPacked) {
		t.Fatalf("packed % x, want % x", out.Packed, handPacked)
	}
	st := out.Stats[0]
	if st.Err != handErr || st.RTNErr != handErr || st.Clipped != 0 {
		t.Fatalf("stats %+v, want Err = RTNErr = %v, no clip", st, handErr)
	}
}

func TestMXFP4RTNHand(t *testing.T) {
	x := append(append([]float32{}, handGroup...), make([]float32, 16)...)
	out := newFP4Out(1, 32, 32)
	if err := QuantizeMXFP4(out, x, 1, 32, SearchRTN); err != nil {
		t.Fatal(err)
	}
	if out.Scales[0] != 124 {
		t.Fatalf("scale code %d, want 124 (2^-3)", out.Scales[0])
	}
	want := append(append([]byte{}, handPacked...), make([]byte, 8)...)
	if string(out.Packed) != string(want) {
		t.Fatalf("packed % x, want % x", out.Packed, want)
	}
	if st := out.Stats[0]; st.Err != handErr || st.RTNErr != handErr {
		t.Fatalf("stats %+v, want Err = RTNErr = %v", st, handErr)
	}
}

// TestNVFP4ZeroGroup: a group whose scale rounds to zero stores 0.125's code (the library's
// eps) and zero codes.
func TestNVFP4ZeroGroup(t *testing.T) {
	x := make([]float32, 32)
	x[3] = 1e-9 // the first group's scale 2688·bf16(1e-9/6) ≈ 4.5e-7 rounds to zero in e4m3
	x[16], x[17], x[18] = 1, -1e-9, float32(math.Copysign(0, -1))
	out := newFP4Out(1, 32, 16)
	for _, s := range []Search{SearchRTN, SearchMSE} {
		if err := QuantizeNVFP4(out, x, 1, 32, NVFP4GlobalScale(1), s); err != nil {
			t.Fatal(err)
		}
		if out.Scales[0] != nvfp4EpsCode {
			t.Errorf("zero group: scale code %#x, want %#x", out.Scales[0], nvfp4EpsCode)
		}
		for i, b := range out.Packed[:8] {
			if b != 0 {
				t.Fatalf("zero group: byte %d is %#x", i, b)
			}
		}
		if out.Packed[8] != 0x87 || out.Packed[9] != 0x08 {
			t.Errorf("second group: % x, want 87 08 (6, -0, -0)", out.Packed[8:10])
		}
	}
}

// TestFP4SearchNeverWorse: the mse search's error is at most the RTN error, its RTNErr is the
// RTN run's error, and the bytes it writes decode to its reported error.
func TestFP4SearchNeverWorse(t *testing.T) {
	const rows, cols = 16, 256
	x := goldenInput(rows, cols)
	for _, f := range []struct {
		name string
		g    int
		run  func(FP4Out, Search) error
		sc   func([]float32, []byte)
	}{
		{"nvfp4", 16, func(o FP4Out, s Search) error { return QuantizeNVFP4(o, x, rows, cols, NVFP4GlobalScale(maxAbs(x)), s) },
			func(d []float32, c []byte) { NVFP4Scales(d, c, NVFP4GlobalScale(maxAbs(x))) }},
		{"mxfp4", 32, func(o FP4Out, s Search) error { return QuantizeMXFP4(o, x, rows, cols, s) }, MXFP4Scales},
	} {
		rtn, mse := newFP4Out(rows, cols, f.g), newFP4Out(rows, cols, f.g)
		if err := f.run(rtn, SearchRTN); err != nil {
			t.Fatal(err)
		}
		if err := f.run(mse, SearchMSE); err != nil {
			t.Fatal(err)
		}
		var rtnSum, mseSum float64
		changed := 0
		for k := range mse.Stats {
			r, m := rtn.Stats[k], mse.Stats[k]
			if m.Err > r.Err || m.RTNErr != r.Err || r.RTNErr != r.Err || m.SumSq != r.SumSq {
				t.Fatalf("%s group %d: rtn %+v, mse %+v", f.name, k, r, m)
			}
			if mse.Scales[k] != rtn.Scales[k] {
				changed++
			}
			rtnSum += float64(r.Err)
			mseSum += float64(m.Err)
		}
		if changed == 0 || !(mseSum < rtnSum) {
			t.Errorf("%s: the search changed %d groups, error %g vs rtn %g", f.name, changed, mseSum, rtnSum)
		}
		// The reported group errors are those of the written bytes.
		scales := make([]float32, len(mse.Scales))
		f.sc(scales, mse.Scales)
		got := make([]float32, len(x))
		if err := DequantizeFP4(got, mse.Packed, scales, rows, cols, f.g); err != nil {
			t.Fatal(err)
		}
		for k, st := range mse.Stats {
			var e [8]float32
			for i := range f.g {
				d := x[k*f.g+i] - got[k*f.g+i]
				e[i%8] += float32(d * d)
			}
			if s := lanes(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]); s != st.Err {
				t.Fatalf("%s group %d: decoded error %v, reported %v", f.name, k, s, st.Err)
			}
		}
		es, err := (CPU{}).ErrorSumsFP4(x, mse.Packed, scales, rows, cols, f.g, 7)
		if err != nil {
			t.Fatal(err)
		}
		if want := (CPU{}).ErrorSums(x, got, 7); es != want {
			t.Errorf("%s: ErrorSumsFP4 %+v, ErrorSums %+v", f.name, es, want)
		}
	}
}

// TestFP4RoundTrip: values on the grid of a group's own RTN scale come back exactly.
func TestFP4RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 8, 64
	x := make([]float32, rows*cols)
	for k := range rows * cols / 32 {
		s := float32(math.Ldexp(1, rng.IntN(40)-30))
		for i := range 32 {
			x[k*32+i] = E2M1Value(uint8(rng.IntN(16))) * s
		}
		x[k*32+rng.IntN(32)] = 6 * s // the extreme at 6·s: the RTN scale is s
	}
	for _, s := range []Search{SearchRTN, SearchMSE} {
		out := newFP4Out(rows, cols, 32)
		if err := QuantizeMXFP4(out, x, rows, cols, s); err != nil {
			t.Fatal(err)
		}
		sc := make([]float32, len(out.Scales))
		MXFP4Scales(sc, out.Scales)
		got := make([]float32, len(x))
		if err := DequantizeFP4(got, out.Packed, sc, rows, cols, 32); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			if got[i] != x[i] {
				t.Fatalf("search %d: element %d: %v, want %v", s, i, got[i], x[i])
			}
		}
	}
}

func TestFP4Errors(t *testing.T) {
	x := make([]float32, 64)
	if err := QuantizeNVFP4(newFP4Out(1, 64, 16), x, 1, 64, 0, SearchRTN); !errors.Is(err, ErrGlobalScale) {
		t.Errorf("zero global scale: %v", err)
	}
	if err := QuantizeNVFP4(newFP4Out(1, 64, 16), x, 1, 64, float32(math.NaN()), SearchRTN); !errors.Is(err, ErrGlobalScale) {
		t.Errorf("NaN global scale: %v", err)
	}
	if err := QuantizeMXFP4(newFP4Out(1, 48, 32), x[:48], 1, 48, SearchRTN); !errors.Is(err, ErrShape) {
		t.Errorf("48 columns in groups of 32: %v", err)
	}
	bad := newFP4Out(1, 64, 16)
	bad.Scales = bad.Scales[:3]
	if err := QuantizeNVFP4(bad, x, 1, 64, 1, SearchRTN); !errors.Is(err, ErrShape) {
		t.Errorf("short scales: %v", err)
	}
	x[37] = float32(math.Inf(-1))
	var nf *NonFiniteError
	if err := QuantizeMXFP4(newFP4Out(1, 64, 32), x, 1, 64, SearchMSE); !errors.As(err, &nf) || nf.Index != 37 {
		t.Errorf("-Inf at 37: %v", err)
	}
	if err := QuantizeNVFP4(newFP4Out(1, 64, 16), x, 1, 64, 1, SearchMSE); !errors.As(err, &nf) || nf.Index != 37 {
		t.Errorf("-Inf at 37: %v", err)
	}
	if err := DequantizeFP4(make([]float32, 64), make([]byte, 31), make([]float32, 2), 1, 64, 32); !errors.Is(err, ErrShape) {
		t.Errorf("short packed: %v", err)
	}
}

// TestGoldenHashesFP4 pins the FP4 quantizers' output bytes (codes, scale codes, statistics) on
// the golden input; see TestGoldenHashes.
func TestGoldenHashesFP4(t *testing.T) {
	const rows, cols = 64, 512
	x := goldenInput(rows, cols)
	g := NVFP4GlobalScale(maxAbs(x))
	cases := []struct {
		name string
		gs   int
		run  func(FP4Out) error
		want string
	}{
		{"nvfp4-rtn", 16, func(o FP4Out) error { return QuantizeNVFP4(o, x, rows, cols, g, SearchRTN) }, "2cbcaeb4ca411b28"},
		{"nvfp4-mse", 16, func(o FP4Out) error { return QuantizeNVFP4(o, x, rows, cols, g, SearchMSE) }, "74fe85513cd26e1a"},
		{"mxfp4-rtn", 32, func(o FP4Out) error { return QuantizeMXFP4(o, x, rows, cols, SearchRTN) }, "c9c88adcc665a864"},
		{"mxfp4-mse", 32, func(o FP4Out) error { return QuantizeMXFP4(o, x, rows, cols, SearchMSE) }, "f0b9918c2424488f"},
	}
	for _, c := range cases {
		out := newFP4Out(rows, cols, c.gs)
		if err := c.run(out); err != nil {
			t.Fatal(err)
		}
		if got := hashOf(out.Packed, out.Scales, statsBytes(out.Stats)); got != c.want {
			t.Errorf("%s: output hash %s, want %s", c.name, got, c.want)
		}
	}
}

func newFP4Out(rows, cols, g int) FP4Out {
	return FP4Out{
		Packed: make([]byte, rows*cols/2),
		Scales: make([]byte, rows*cols/g),
		Stats:  make([]GroupStats, rows*cols/g),
	}
}

func maxAbs(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// TestNVFP4ScalesTable checks NVFP4Scales against NVFP4Scale code by code, on slices short
// enough for the per-code divisions and long enough for the table of all 256 codes (NaN codes
// included), under ordinary and extreme global scales.
func TestNVFP4ScalesTable(t *testing.T) {
	codes := make([]byte, 3*256+5)
	for i := range codes {
		codes[i] = byte(i*7 + i/256)
	}
	for _, g := range []float32{NVFP4GlobalScale(0.02), 1, NVFP4MinGlobal, NVFP4MaxGlobal} {
		for _, n := range []int{7, 511, 512, len(codes)} {
			dst := make([]float32, n)
			NVFP4Scales(dst, codes[:n], g)
			for i, c := range codes[:n] {
				if want := NVFP4Scale(c, g); math.Float32bits(dst[i]) != math.Float32bits(want) {
					t.Fatalf("g %v, %d codes: code %#x: %v, want %v", g, n, c, dst[i], want)
				}
			}
		}
	}
}
