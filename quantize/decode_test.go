package quantize

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/safetensors"
)

func TestDecodeDense(t *testing.T) {
	cases := []struct {
		dt   safetensors.DType
		src  []byte
		want []float32
	}{
		{safetensors.BF16, []byte{0x80, 0x3f, 0x00, 0xc0, 0x49, 0x40}, []float32{1, -2, 3.140625}},
		{safetensors.F16, []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00}, []float32{1, -2, 0x1p-24}},
		{safetensors.F32, f32bytes(1, -2, 1e-40), []float32{1, -2, 1e-40}},
	}
	for _, c := range cases {
		got := make([]float32, len(c.want))
		if err := DecodeDense(got, c.src, c.dt); err != nil {
			t.Fatalf("%s: %v", c.dt, err)
		}
		if !equalF32(got, c.want) {
			t.Errorf("%s: %v, want %v", c.dt, got, c.want)
		}
	}
	if err := DecodeDense(make([]float32, 2), make([]byte, 2), safetensors.F8E4M3); !errors.Is(err, safetensors.ErrUnsupportedDType) {
		t.Errorf("F8 as dense: %v", err)
	}
	if err := DecodeDense(make([]float32, 2), make([]byte, 3), safetensors.BF16); !errors.Is(err, ErrBadShape) {
		t.Errorf("odd bytes: %v", err)
	}
}

func TestFP8BlockSize(t *testing.T) {
	cases := []struct {
		rows, cols int
		shape      []int64
		bh, bw     int
		ok         bool
	}{
		{256, 512, []int64{2, 4}, 128, 128, true},
		{300, 200, []int64{3, 2}, 128, 128, true},  // edge blocks
		{44, 7168, []int64{1, 56}, 128, 128, true}, // last slab of a tensor
		{200, 128, []int64{2, 1}, 128, 128, true},  // slab of 200 rows: 128 preferred over 100
		{256, 256, []int64{4, 4}, 64, 64, true},    // other block sizes are inferred
		{256, 256, []int64{3, 2}, 86, 128, true},   // any consistent tiling
		{10, 256, []int64{6, 1}, 0, 0, false},      // no edge e with ceil(10/e) = 6
		{256, 256, []int64{2}, 0, 0, false},
		{256, 256, []int64{0, 2}, 0, 0, false},
		{4, 256, []int64{5, 2}, 0, 0, false},
	}
	for _, c := range cases {
		bh, bw, err := FP8BlockSize(c.rows, c.cols, c.shape)
		if (err == nil) != c.ok || bh != c.bh || bw != c.bw {
			t.Errorf("%d×%d scale %v: %d×%d %v", c.rows, c.cols, c.shape, bh, bw, err)
		}
		if err != nil && !errors.Is(err, ErrBadShape) {
			t.Errorf("error %v does not wrap ErrBadShape", err)
		}
	}
}

// TestDecodeFP8Block: dequantized value = e4m3(code)·scale[i/128][j/128], edge blocks included.
func TestDecodeFP8Block(t *testing.T) {
	const rows, cols = 130, 260
	src := make([]byte, rows*cols)
	for i := range src {
		src[i] = byte(i*7) &^ 0x80 // avoid NaN codes 0x7f: i*7 & 0x7f hits 0x7f, patch below
		if src[i] == 0x7f {
			src[i] = 0x7e
		}
	}
	scale := []float32{1, 2, 4, 0.5, 0.25, 8}
	dst := make([]float32, rows*cols)
	if err := DecodeFP8Block(dst, src, scale, []int64{2, 3}, rows, cols); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		want := safetensors.F8E4M3ToFloat32(src[i]) * scale[(i/cols)/128*3+(i%cols)/128]
		if v != want {
			t.Fatalf("element %d: %v, want %v", i, v, want)
		}
	}
	bad := append([]float32(nil), scale...)
	bad[4] = float32(math.Inf(1))
	if err := DecodeFP8Block(dst, src, bad, []int64{2, 3}, rows, cols); !errors.Is(err, ErrNonFinite) {
		t.Errorf("Inf scale: %v", err)
	}
	if err := DecodeFP8Block(dst, src, scale[:5], []int64{2, 3}, rows, cols); !errors.Is(err, ErrBadShape) {
		t.Errorf("short scale: %v", err)
	}
	if err := DecodeFP8Block(dst[:10], src, scale, []int64{2, 3}, rows, cols); !errors.Is(err, ErrBadShape) {
		t.Errorf("short dst: %v", err)
	}
}

func TestDecodeFP8Channel(t *testing.T) {
	src := []byte{0x38, 0xb8, 0x40, 0x30, 0x00, 0x80} // 1, -1, 2, 0.5, 0, -0
	dst := make([]float32, 6)
	if err := DecodeFP8Channel(dst, src, []float32{2, 3}, 2, 3); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, -2, 4, 1.5, 0, 0}; !equalF32(dst[:4], want[:4]) || dst[4] != 0 || dst[5] != 0 {
		t.Errorf("per channel: %v", dst)
	}
	if err := DecodeFP8Channel(dst, src, []float32{0.5}, 2, 3); err != nil {
		t.Fatal(err)
	}
	if dst[2] != 1 || dst[3] != 0.25 {
		t.Errorf("per tensor: %v", dst)
	}
	if err := DecodeFP8Channel(dst, src, []float32{1, 2, 3}, 2, 3); !errors.Is(err, ErrBadShape) {
		t.Errorf("3 scales for 2 rows: %v", err)
	}
	if err := DecodeFP8Channel(dst, src, []float32{float32(math.NaN()), 1}, 2, 3); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN scale: %v", err)
	}
}

func TestCheckUE8M0(t *testing.T) {
	good := []float32{1, 0.5, 2, 0x1p-127, 0x1p-126, 0x1p127, 0x1p-20}
	if err := CheckUE8M0(good); err != nil {
		t.Errorf("valid scales refused: %v", err)
	}
	for _, v := range []float32{0, -1, 3, 1.5, 0x1p-128, float32(math.Inf(1)), float32(math.NaN()), 0.75} {
		if err := CheckUE8M0([]float32{1, v}); !errors.Is(err, ErrBadScale) {
			t.Errorf("%v accepted: %v", v, err)
		}
	}
}

// BenchmarkDecodeDense decodes a source slab of 4 Mi weights (the conversion's slab) and the
// 256-value pieces a finiteness check decodes, per dense dtype.
func BenchmarkDecodeDense(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32} {
		for _, n := range []int{256, 4 << 20} {
			src := make([]byte, n*dt.Bits()/8)
			for i := range src {
				src[i] = byte(rng.Uint32() & 0x3f) // finite values of every dtype
			}
			dst := make([]float32, n)
			b.Run(fmt.Sprintf("%s/%d", dt, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if err := DecodeDense(dst, src, dt); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
