package quantize

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pdq/kernels"
	"pdq/safetensors"
)

// slabBackend is kernels.CPU behind another type, so the variants take their non-CPU path
// (whole slabs per call), and it records the calls.
type slabBackend struct {
	kernels.CPU
	calls int
}

func (s *slabBackend) QuantizeFP8Block(codes []byte, scaleInv []float32, src []float32, rows, cols int) error {
	s.calls++
	return s.CPU.QuantizeFP8Block(codes, scaleInv, src, rows, cols)
}

func (s *slabBackend) QuantizeInt4(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params) error {
	s.calls++
	return s.CPU.QuantizeInt4(out, src, rows, cols, p)
}

func TestBackendVariantsMatchCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for _, sh := range [][2]int{{1, 32}, {130, 224}, {300, 1024}} {
		rows, cols := sh[0], sh[1]
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		want, err := QuantizeFP8Block(ctx, w, rows, cols, FP8Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		be := &slabBackend{}
		got, err := QuantizeFP8Block(ctx, w, rows, cols, FP8Options{Workers: 2, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		if be.calls != 1 || !bytes.Equal(got.Data, want.Data) || !slices.Equal(got.ScaleInv, want.ScaleInv) {
			t.Fatalf("%dx%d: FP8 variant differs (calls %d)", rows, cols, be.calls)
		}
		d1, d2 := make([]float32, len(w)), make([]float32, len(w))
		if err := DequantizeFP8Block(d1, want.Data, want.ScaleInv, rows, cols); err != nil {
			t.Fatal(err)
		}
		if err := DequantizeFP8BlockOn(be, d2, want.Data, want.ScaleInv, rows, cols); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d1, d2) {
			t.Fatalf("%dx%d: FP8 dequantize variant differs", rows, cols)
		}
		shape := []int64{int64((rows + 127) / 128), int64((cols + 127) / 128)}
		if err := DecodeFP8Block(d1, want.Data, want.ScaleInv, shape, rows, cols); err != nil {
			t.Fatal(err)
		}
		if err := DecodeFP8BlockOn(be, d2, want.Data, want.ScaleInv, shape, rows, cols); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d1, d2) {
			t.Fatalf("%dx%d: FP8 decode variant differs", rows, cols)
		}
		be.calls = 0
		i4, err := QuantizeInt4(ctx, w, rows, cols, Int4Options{GroupSize: 32, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		g4, err := QuantizeInt4(ctx, w, rows, cols, Int4Options{GroupSize: 32, Workers: 2, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		if be.calls != 1 || !bytes.Equal(i4.Packed, g4.Packed) || !bytes.Equal(i4.Scales, g4.Scales) || i4.SumSqErr != g4.SumSqErr {
			t.Fatalf("%dx%d: INT4 with a slab backend differs (calls %d)", rows, cols, be.calls)
		}
		if err := DequantizeInt4(d1, i4.Packed, i4.Scales, safetensors.BF16, rows, cols, 32); err != nil {
			t.Fatal(err)
		}
		poisonF32 := func(f []float32) {
			for i := range f {
				f[i] = float32(math.NaN())
			}
		}
		poisonF32(d2)
		if err := DequantizeInt4On(be, d2, i4.Packed, i4.Scales, safetensors.BF16, rows, cols, 32); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d1, d2) {
			t.Fatalf("%dx%d: INT4 dequantize variant differs", rows, cols)
		}
	}
}

func TestBackendVariantsErrors(t *testing.T) {
	w := []float32{1, 2, float32(math.NaN()), 4}
	be := &slabBackend{}
	if _, err := QuantizeFP8Block(context.Background(), w, 2, 2, FP8Options{Backend: be}); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN: %v, want ErrNonFinite", err)
	}
	if _, err := QuantizeFP8Block(context.Background(), w, 3, 2, FP8Options{Backend: be}); !errors.Is(err, ErrBadShape) {
		t.Errorf("bad shape: %v, want ErrBadShape", err)
	}
	if err := DecodeFP8BlockOn(be, make([]float32, 4), make([]byte, 4), []float32{float32(math.Inf(1))}, []int64{1, 1}, 2, 2); !errors.Is(err, ErrNonFinite) {
		t.Errorf("Inf scale: %v, want ErrNonFinite", err)
	}
}
