package quantize

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pdq/safetensors"
)

// randWeights returns n weights: normal (σ = 0.02) or, when heavy, Student-t ν=4 with a few
// spikes, and some all-zero and single-value groups.
func randWeights(seed uint64, n int, heavy bool) []float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := make([]float32, n)
	for i := range w {
		v := rng.NormFloat64() * 0.02
		if heavy {
			var c float64
			for range 4 {
				z := rng.NormFloat64()
				c += z * z
			}
			v /= math.Sqrt(c / 4)
			if rng.IntN(500) == 0 {
				v *= 20
			}
		}
		w[i] = float32(v)
	}
	if n >= 256 {
		clear(w[32:64])
		for i := 128; i < 160; i++ {
			w[i] = -0.5
		}
	}
	return w
}

func mustInt4(t testing.TB, w []float32, rows, cols int, opt Int4Options) *Int4Result {
	t.Helper()
	r, err := QuantizeInt4(context.Background(), w, rows, cols, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func dequant(t testing.TB, r *Int4Result) []float32 {
	t.Helper()
	got := make([]float32, r.Rows*r.Cols)
	if err := DequantizeInt4(got, r.Packed, r.Scales, safetensors.BF16, r.Rows, r.Cols, r.GroupSize); err != nil {
		t.Fatal(err)
	}
	return got
}

// rtnReference is a plain restatement of the compressed-tensors rule: scale = bf16(absmax/7.5)
// in float32, q = round-half-even(clamp(x/scale, -8, 7)), nibble q+8, byte j of a row holding
// elements 2j (low nibble) and 2j+1 (high nibble).
func rtnReference(w []float32, rows, cols, g int) (packed, scales []byte) {
	packed = make([]byte, rows*cols/2)
	scales = make([]byte, 2*rows*cols/g)
	for k := range rows * cols / g {
		x := w[k*g : (k+1)*g]
		var a float64
		for _, v := range x {
			a = math.Max(a, math.Abs(float64(v)))
		}
		s := safetensors.RoundBF16(float32(a) / 7.5)
		binary.LittleEndian.PutUint16(scales[2*k:], safetensors.Float32ToBF16(s))
		for i, v := range x {
			q := 0.0
			if s != 0 {
				q = math.RoundToEven(math.Max(-8, math.Min(7, float64(v/s))))
			}
			e := k*g + i
			packed[e/2] |= byte(int(q)+8) << (4 * (e % 2))
		}
	}
	return packed, scales
}

func TestInt4GoldenVectors(t *testing.T) {
	// -7.5 has |x| = absmax = 7.5, so the scale is 1 and -7.5/1 rounds half to even to -8.
	w := []float32{-7.5, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}
	w = append(w, make([]float32, 16)...) // second row: zeros
	r := mustInt4(t, w, 2, 16, Int4Options{GroupSize: 0, Method: MethodRTN})
	want := []byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88}
	if !bytes.Equal(r.Packed, want) {
		t.Fatalf("packed % x, want % x", r.Packed, want)
	}
	if w0, w1 := binary.LittleEndian.Uint32(r.Packed), binary.LittleEndian.Uint32(r.Packed[4:]); w0 != 0x76543210 || w1 != 0xFEDCBA98 {
		t.Fatalf("words %#08x %#08x", w0, w1)
	}
	if !bytes.Equal(r.Scales, []byte{0x80, 0x3f, 0, 0}) {
		t.Fatalf("scales % x, want 80 3f 00 00", r.Scales)
	}
	got := dequant(t, r)
	for i, v := range got[16:] {
		if v != 0 || math.Signbit(float64(v)) {
			t.Fatalf("zero row element %d dequantized to %v", i, v)
		}
	}
	if got[0] != -8 || got[15] != 7 {
		t.Fatalf("dequantized %v", got[:16])
	}
}

// TestRTNBitExact compares MethodRTN with rtnReference on random, heavy-tailed and tie-rich data.
func TestRTNBitExact(t *testing.T) {
	ties := make([]float32, 64*128)
	for i := range ties {
		ties[i] = float32(i%31-15) * 0.25 // many x/s exactly on .5
	}
	inputs := map[string][]float32{
		"gauss": randWeights(1, 64*128, false),
		"t4":    randWeights(2, 64*128, true),
		"ties":  ties,
	}
	for name, w := range inputs {
		for _, g := range []int{0, 32, 64, 128} {
			r := mustInt4(t, w, 64, 128, Int4Options{GroupSize: g, Method: MethodRTN})
			gg := g
			if g == 0 {
				gg = 128
			}
			packed, scales := rtnReference(w, 64, 128, gg)
			if !bytes.Equal(r.Packed, packed) || !bytes.Equal(r.Scales, scales) {
				t.Fatalf("%s g%d: RTN output differs from the reference rule", name, g)
			}
		}
	}
}

// TestRTNHalfScale: every element not clipped dequantizes within scale/2 of its source.
func TestRTNHalfScale(t *testing.T) {
	for _, heavy := range []bool{false, true} {
		w := randWeights(3, 128*256, heavy)
		r := mustInt4(t, w, 128, 256, Int4Options{GroupSize: 32, Method: MethodRTN})
		got := dequant(t, r)
		var clipped int64
		for i, x := range w {
			s := safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(r.Scales[2*(i/32):]))
			if f := x / s; s != 0 && (f >= 7.5 || f < -8.5) {
				clipped++
				continue
			}
			if d := math.Abs(float64(x - got[i])); d > float64(s)/2*(1+1e-6) {
				t.Fatalf("element %d: |%v - %v| = %v > scale/2 = %v", i, x, got[i], d, s/2)
			}
		}
		if clipped != r.Clipped {
			t.Errorf("Clipped = %d, counted %d", r.Clipped, clipped)
		}
	}
}

// groupErr returns the float64 squared error of every group.
func groupErr(w, got []float32, g int) []float64 {
	e := make([]float64, len(w)/g)
	for i := range w {
		d := float64(w[i]) - float64(got[i])
		e[i/g] += d * d
	}
	return e
}

// TestMSENoWorseThanRTN: in every group, for random and heavy-tailed data and every group size,
// the MSE result's error is at most the RTN result's error. The kernel decides with float32 sums
// (Err ≤ RTNErr holds exactly there); measured in float64 a near tie may differ by rounding, so
// the float64 check allows a relative 1e-6 (never needed so far).
func TestMSENoWorseThanRTN(t *testing.T) {
	for seed := range uint64(4) {
		for _, heavy := range []bool{false, true} {
			w := randWeights(10+seed, 256*256, heavy)
			for _, g := range []int{0, 32, 64, 128} {
				for _, signed := range []bool{false, true} {
					rtn := mustInt4(t, w, 256, 256, Int4Options{GroupSize: g, Method: MethodRTN})
					mse := mustInt4(t, w, 256, 256, Int4Options{GroupSize: g, SignedScales: signed})
					er := groupErr(w, dequant(t, rtn), mse.GroupSize)
					em := groupErr(w, dequant(t, mse), mse.GroupSize)
					better := 0
					for k := range er {
						if em[k] > er[k]*(1+1e-6) {
							t.Fatalf("heavy=%v g%d signed=%v group %d: mse error %g > rtn %g", heavy, g, signed, k, em[k], er[k])
						}
						if em[k] < er[k] {
							better++
						}
					}
					if better < len(er)/2 {
						t.Errorf("heavy=%v g%d: mse better than rtn in only %d of %d groups", heavy, g, better, len(er))
					}
					if mse.SumSqErr > mse.RTNSumSqErr || rtn.SumSqErr != rtn.RTNSumSqErr || mse.RTNSumSqErr != rtn.SumSqErr {
						t.Fatalf("sums: mse %g (rtn by mse %g), rtn %g", mse.SumSqErr, mse.RTNSumSqErr, rtn.SumSqErr)
					}
				}
			}
		}
	}
}

// TestZeroGroups: all-zero groups (and -0) get scale 0 and nibble 8 with every method and
// dequantize to exact zeros; a group of tiny subnormal values cannot produce NaN either.
func TestZeroGroups(t *testing.T) {
	w := make([]float32, 4*64)
	w[5] = float32(math.Copysign(0, -1))
	for i := 64; i < 128; i++ {
		w[i] = 0x1p-149 * float32(i%3-1) // smallest subnormals
	}
	for i := 128; i < 192; i++ {
		w[i] = float32(i) * 1e-3
	}
	for _, opt := range []Int4Options{{GroupSize: 32, Method: MethodRTN}, {GroupSize: 32}, {GroupSize: 64, SignedScales: true}, {GroupSize: 0}} {
		r := mustInt4(t, w, 4, 64, opt)
		got := dequant(t, r)
		for i := range 64 {
			if r.Packed[i/2] != 0x88 || got[i] != 0 {
				t.Fatalf("%+v: zero element %d: byte %#x value %v", opt, i, r.Packed[i/2], got[i])
			}
		}
		for i, v := range got {
			if v != v {
				t.Fatalf("%+v: NaN at %d", opt, i)
			}
		}
		if s := binary.LittleEndian.Uint16(r.Scales); s != 0 {
			t.Fatalf("%+v: zero group scale %#x", opt, s)
		}
		if math.IsNaN(r.SQNR()) || math.IsNaN(r.RTNSQNR()) {
			t.Fatalf("%+v: NaN SQNR", opt)
		}
	}
}

func TestInt4RefusesNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		w := randWeights(5, 64*64, false)
		w[40*64+9] = bad
		w[50*64] = bad
		for _, workers := range []int{1, 4} {
			_, err := QuantizeInt4(context.Background(), w, 64, 64, Int4Options{GroupSize: 32, Workers: workers})
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "element 2569 (row 40, column 9)") {
				t.Fatalf("%v workers %d: %v", bad, workers, err)
			}
		}
		_, err := QuantizeFP8Block(context.Background(), w, 64, 64, FP8Options{Workers: 2})
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "element 2569 ") {
			t.Fatalf("FP8 %v: %v", bad, err)
		}
		err = CheckFinite("model.layers.3.mlp.experts.7.up_proj.weight", w, 0)
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), `"model.layers.3.mlp.experts.7.up_proj.weight": element 2569 is`) {
			t.Fatalf("CheckFinite: %v", err)
		}
	}
	if err := CheckFinite("w", []float32{0, 1, -3e38}, 0); err != nil {
		t.Fatal(err)
	}
}

// TestInt4Workers: byte-identical output for any worker count.
func TestInt4Workers(t *testing.T) {
	w := randWeights(6, 300*512, true)
	for _, opt := range []Int4Options{{GroupSize: 32}, {GroupSize: 128, Method: MethodRTN}, {GroupSize: 64, SignedScales: true}, {GroupSize: 0}} {
		opt.Workers = 1
		want := mustInt4(t, w, 300, 512, opt)
		for _, n := range []int{2, 3, 8, 0} {
			opt.Workers = n
			got := mustInt4(t, w, 300, 512, opt)
			if !bytes.Equal(got.Packed, want.Packed) || !bytes.Equal(got.Scales, want.Scales) ||
				got.SumSqErr != want.SumSqErr || got.RTNSumSqErr != want.RTNSumSqErr || got.Clipped != want.Clipped || got.SumSq != want.SumSq {
				t.Fatalf("%+v: output differs from one worker", opt)
			}
		}
	}
}

// TestInt4Slabs: quantizing row ranges on their own gives the rows of the whole.
func TestInt4Slabs(t *testing.T) {
	w := randWeights(7, 300*256, false)
	for _, opt := range []Int4Options{{GroupSize: 32}, {GroupSize: 64, Method: MethodRTN}} {
		whole := mustInt4(t, w, 300, 256, opt)
		var packed, scales []byte
		for _, cut := range [][2]int{{0, 37}, {37, 38}, {38, 300}} {
			r := mustInt4(t, w[cut[0]*256:cut[1]*256], cut[1]-cut[0], 256, opt)
			packed = append(packed, r.Packed...)
			scales = append(scales, r.Scales...)
		}
		if !bytes.Equal(packed, whole.Packed) || !bytes.Equal(scales, whole.Scales) {
			t.Fatalf("%+v: slabs differ from the whole", opt)
		}
	}
}

func TestInt4OptionsValidate(t *testing.T) {
	cases := []struct {
		opt  Int4Options
		cols int
		want error
	}{
		{Int4Options{GroupSize: 32}, 4096, nil},
		{Int4Options{GroupSize: 128, Method: MethodRTN}, 256, nil},
		{Int4Options{GroupSize: 0}, 200, nil},
		{Int4Options{GroupSize: 64, Method: MethodMSE}, 64, nil},
		{Int4Options{GroupSize: 16}, 4096, ErrInvalidOptions},
		{Int4Options{GroupSize: 32, Method: "gptq"}, 4096, ErrInvalidOptions},
		{Int4Options{GroupSize: 32, Method: MethodRTN, SignedScales: true}, 4096, ErrInvalidOptions},
		{Int4Options{GroupSize: 128}, 192, ErrBadShape},
		{Int4Options{GroupSize: 0}, 100, ErrBadShape},
		{Int4Options{GroupSize: 32}, 0, ErrBadShape},
	}
	for _, c := range cases {
		if err := c.opt.Validate(c.cols); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%+v cols %d: %v, want %v", c.opt, c.cols, err, c.want)
		}
	}
	if _, err := QuantizeInt4(context.Background(), make([]float32, 10), 1, 32, Int4Options{GroupSize: 32}); !errors.Is(err, ErrBadShape) {
		t.Errorf("short source: %v", err)
	}
}

func TestDequantizeInt4Errors(t *testing.T) {
	dst := make([]float32, 64)
	packed := make([]byte, 32)
	cases := []struct {
		scales []byte
		dt     safetensors.DType
		g      int
		want   error
	}{
		{make([]byte, 4), safetensors.BF16, 32, nil},
		{make([]byte, 4), safetensors.F16, 32, nil},
		{make([]byte, 8), safetensors.F32, 32, nil},
		{make([]byte, 2), safetensors.BF16, 0, nil},
		{make([]byte, 2), safetensors.BF16, 32, ErrBadShape},
		{make([]byte, 4), safetensors.I32, 32, safetensors.ErrUnsupportedDType},
		{make([]byte, 4), safetensors.BF16, 24, ErrBadShape},
		{[]byte{0x80, 0x7f, 0, 0}, safetensors.BF16, 32, ErrNonFinite},
	}
	for i, c := range cases {
		if err := DequantizeInt4(dst, packed, c.scales, c.dt, 1, 64, c.g); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
	// F16 and F32 scales decode to the same values as BF16 ones.
	w := randWeights(8, 64, false)
	r := mustInt4(t, w, 1, 64, Int4Options{GroupSize: 32})
	want := dequant(t, r)
	s32 := make([]byte, 8)
	for k := range 2 {
		binary.LittleEndian.PutUint32(s32[4*k:], math.Float32bits(safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(r.Scales[2*k:]))))
	}
	got := make([]float32, 64)
	if err := DequantizeInt4(got, r.Packed, s32, safetensors.F32, 1, 64, 32); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("F32 scales: element %d %v != %v", i, got[i], want[i])
		}
	}
}

// measuredCases are the slabs and options the tests of measured quantization take: every
// method, group sizes and one scale per row, a single row and none.
var measuredCases = []struct {
	rows, cols int
	opt        Int4Options
}{
	{300, 1024, Int4Options{GroupSize: 32, Method: MethodRTN}},
	{300, 1024, Int4Options{GroupSize: 32, Method: MethodMSE}},
	{97, 768, Int4Options{GroupSize: 128, Method: MethodMSE}},
	{64, 512, Int4Options{GroupSize: 64, Method: MethodMSE, SignedScales: true}},
	{5, 4096, Int4Options{GroupSize: 0, Method: MethodRTN}},
	{1, 64, Int4Options{GroupSize: 32, Method: MethodRTN}},
	{0, 64, Int4Options{GroupSize: 32, Method: MethodRTN}},
}

// TestQuantizeInt4Measured: measuring chunk by chunk while quantizing (Int4Bands, the slab one
// band) gives the bytes of QuantizeInt4 and the metrics of AddInt4 over the whole slab, bit for
// bit, for every method, group size and worker count of QuantizeInt4, and reusing the
// result's storage changes nothing. The weights also come with rows scaled from 2^-20 to 2^20:
// their float64 sums round, so a change in the order of the additions shows.
func TestQuantizeInt4Measured(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	var dst Int4Result
	for c := range 2 * len(measuredCases) {
		tc, wide := measuredCases[c/2], c%2 == 1
		w := make([]float32, tc.rows*tc.cols)
		for i := range w {
			w[i] = float32(r.NormFloat64()) * 0.02
			if r.IntN(300) == 0 {
				w[i] *= 10
			}
			if r.IntN(500) == 0 {
				w[i] = 0
			}
			if wide {
				row := i / max(tc.cols, 1)
				w[i] = float32(math.Ldexp(float64(w[i]), 7*row%41-20))
			}
		}
		for _, workers := range []int{1, 2} {
			o := tc.opt
			o.Workers = workers
			want, err := QuantizeInt4(context.Background(), w, tc.rows, tc.cols, o)
			if err != nil {
				t.Fatal(err)
			}
			var wantM Metrics
			if err := wantM.AddInt4(w, want, 1000); err != nil {
				t.Fatal(err)
			}
			var gotM Metrics
			if err := measureWhole(&dst, w, tc.rows, tc.cols, o, &gotM, 1000); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%dx%d %+v wide %v", tc.rows, tc.cols, o, wide)
			if !bytes.Equal(dst.Packed, want.Packed) || !bytes.Equal(dst.Scales, want.Scales) ||
				dst.SumSq != want.SumSq || dst.SumSqErr != want.SumSqErr || dst.RTNSumSqErr != want.RTNSumSqErr || dst.Clipped != want.Clipped {
				t.Fatalf("%s: result differs from QuantizeInt4", name)
			}
			if gotM != wantM {
				t.Fatalf("%s: metrics %+v, want %+v", name, gotM, wantM)
			}
		}
	}
}

// measureWhole quantizes and measures a slab as one band of Int4Bands.
func measureWhole(dst *Int4Result, w []float32, rows, cols int, o Int4Options, m *Metrics, base int64) error {
	var b Int4Bands
	if err := b.Begin(dst, rows, cols, o); err != nil {
		return err
	}
	if err := b.Add(context.Background(), w, rows); err != nil {
		return err
	}
	return b.End(m, base)
}
