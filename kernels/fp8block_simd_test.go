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

// TestSIMDErrAccumulatorFP8Pieces adds an FP8 block slab to an ErrAccumulator a few block rows
// at a time with every loop set and compares the sums with the scalar loops' over the whole
// slab: the first piece starts the lanes, the later ones continue them (the AVX-512 loop
// decodes inside its sums for rows and blocks a multiple of 16 columns wide, with a scalar
// head only on the first piece).
func TestSIMDErrAccumulatorFP8Pieces(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for trial := range 40 {
		cols := []int{16, 24, 48, 128, 272, 400}[r.IntN(6)]
		bh := []int{1, 2, 128}[r.IntN(3)]
		bw := []int{16, 32, 128, cols}[r.IntN(4)]
		rows := bh * (1 + r.IntN(4))
		if bh == 128 {
			rows = 128 + r.IntN(130)
		}
		ref, _ := errCase(r, r.IntN(8), rows*cols)
		codes := make([]byte, len(ref))
		for i := range codes {
			codes[i] = byte(r.Uint32())
		}
		sc := make([]float32, ceilDiv(rows, bh)*ceilDiv(cols, bw))
		for i := range sc {
			sc[i] = float32(r.ExpFloat64()) * 0x1p-8
		}
		var want ErrSums
		withEverySet(t, func(t *testing.T) {
			var e ErrAccumulator
			nbw := ceilDiv(cols, bw)
			for r0 := 0; r0 < rows; {
				r1 := min(rows, r0+bh*(1+r.IntN(2)))
				if err := e.AddFP8Block(ref[r0*cols:r1*cols], codes[r0*cols:r1*cols], sc[r0/bh*nbw:ceilDiv(r1, bh)*nbw], r1-r0, cols, bh, bw); err != nil {
					t.Fatal(err)
				}
				r0 = r1
			}
			got := e.Result(3)
			if lp == &scalarLoops {
				whole, err := (CPU{}).ErrorSumsFP8Block(ref, codes, sc, rows, cols, bh, bw, 3)
				if err != nil {
					t.Fatal(err)
				}
				if !sameSums(got, whole) {
					t.Fatalf("trial %d: scalar pieces %+v, whole %+v", trial, got, whole)
				}
				want = got
				return
			}
			if !sameSums(got, want) {
				t.Fatalf("trial %d %d×%d blocks %d×%d: %+v, want %+v", trial, rows, cols, bh, bw, got, want)
			}
		})
	}
}

// TestSIMDErrAccumulatorFP8Empty: a slab with rows but no columns (a Linear with no inputs)
// adds nothing on every set, as the scalar specification does, and panics on none.
func TestSIMDErrAccumulatorFP8Empty(t *testing.T) {
	for _, c := range []struct{ rows, cols, bh, bw int }{{4, 0, 128, 128}, {0, 256, 128, 128}, {128, 0, 128, 16}} {
		withEverySet(t, func(t *testing.T) {
			var e ErrAccumulator
			if err := e.AddFP8Block(nil, nil, nil, c.rows, c.cols, c.bh, c.bw); err != nil {
				t.Fatalf("%d×%d: %v", c.rows, c.cols, err)
			}
			var none ErrAccumulator
			if got := e.Result(3); !sameSums(got, none.Result(3)) {
				t.Errorf("%d×%d: sums %+v of no elements", c.rows, c.cols, got)
			}
		})
	}
}
