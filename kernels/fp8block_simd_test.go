package kernels

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSIMDQuantizeFP8BlockShapes compares the FP8 block quantizer of every loop set with the
// scalar one on shapes whose blocks end inside a vector (rows and columns not multiples of 16 or
// 128) and on blocks holding a non-finite value: the codes, the scales and the error must be
// the same. (The AVX-512 set takes the maximum of a whole block and encodes a whole row of
// blocks per call, the tails of the last block first.)
func TestSIMDQuantizeFP8BlockShapes(t *testing.T) {
	type result struct {
		codes  []byte
		scales []float32
		err    error
	}
	r := rand.New(rand.NewPCG(51, 52))
	sizes := []int{1, 7, 15, 16, 17, 31, 48, 127, 128, 129, 143, 255, 256, 257, 300, 400}
	for trial := range 30 {
		rows, cols := sizes[r.IntN(len(sizes))], sizes[r.IntN(len(sizes))]
		x := adversarial(r, rows*cols, 0.01)
		for i := range x {
			if math.IsInf(float64(x[i]), 0) || math.IsNaN(float64(x[i])) {
				x[i] = 1
			}
			if trial%3 == 0 {
				x[i] *= 0x1p-120 // scales below the smallest normal float32
			}
		}
		if trial%5 == 4 {
			x[r.IntN(len(x))] = float32(math.Inf(-1))
		}
		var want *result
		withEverySet(t, func(t *testing.T) {
			got := &result{codes: make([]byte, len(x)), scales: make([]float32, ceilDiv(rows, FP8Block)*ceilDiv(cols, FP8Block))}
			got.err = (CPU{}).QuantizeFP8Block(got.codes, got.scales, x, rows, cols)
			if want == nil {
				want = got
				return
			}
			var e1, e2 *NonFiniteError
			if errors.As(got.err, &e1) != errors.As(want.err, &e2) || e1 != nil && *e1 != *e2 {
				t.Fatalf("%d×%d: error %v, want %v", rows, cols, got.err, want.err)
			}
			if want.err == nil && (!bytes.Equal(got.codes, want.codes) || !slices.Equal(got.scales, want.scales)) {
				t.Fatalf("%d×%d: codes or scales differ from the scalar loops", rows, cols)
			}
		})
	}
}

// TestSIMDEncodeE4M3RowSweep encodes a row of blocks with every loop set's row encoder and
// compares it with the scalar one: float32 bit patterns across the whole range (NaN, ±Inf,
// subnormals), ±Inf and the saturation edge, and every e4m3 rounding tie with its two neighbours, under block scales 1
// (the patterns as they are) and 3, with a last block whose tail is shorter than a vector.
func TestSIMDEncodeE4M3RowSweep(t *testing.T) {
	x := make([]float32, 0, 1<<20+3<<12+37)
	for b := uint64(0); b < 1<<32; b += 4093 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	for hi := range uint32(1 << 12) {
		for _, lo := range []uint32{0x7ffff, 0x80000, 0x80001} {
			x = append(x, math.Float32frombits(hi<<20|lo))
		}
	}
	x = append(x, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 448, 464, -464, 480)
	x = append(x, x[:37]...)
	sc := make([]float32, ceilDiv(len(x), FP8Block))
	for i := range sc {
		sc[i] = float32(1 + 2*(i/3%2))
	}
	want := make([]byte, len(x))
	encodeE4M3Row(want, x, sc)
	withSIMD(t, func(t *testing.T, set *loopSet) {
		got := make([]byte, len(x))
		set.encodeE4M3Row(got, x, sc)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("element %d, %#08x / %g: %#02x, want %#02x", i, math.Float32bits(x[i]), sc[i/FP8Block], got[i], want[i])
			}
		}
	})
}
