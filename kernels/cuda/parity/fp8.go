//go:build cuda || cudaemu

package parity

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"pdq/internal/floatcodec"
	"pdq/kernels"
)

func fp8Cases() []ParityCase {
	shapes := [][2]int{{1, 1}, {1, 130}, {127, 129}, {128, 128}, {129, 127}, {300, 520}, {257, 2049}, {0, 5}, {2560, 2048}}
	var cs []ParityCase
	for _, sh := range shapes {
		for d := range distCount {
			if sh[0]*sh[1] > 1<<20 && d != distWide {
				continue
			}
			cs = append(cs, ParityCase{
				Name: fmt.Sprintf("fp8/%dx%d/%s", sh[0], sh[1], d),
				Run: func(b Backend, rng *rand.Rand) error {
					return fp8Parity(b, fill(rng, sh[0]*sh[1], d), sh[0], sh[1])
				},
			})
		}
	}
	cs = append(cs, ParityCase{Name: "fp8/edge-values", Run: fp8Edges}, ParityCase{Name: "fp8/nonfinite", Run: fp8NonFinite})
	return cs
}

func fp8Out(rows, cols int) ([]byte, []float32) {
	codes := make([]byte, rows*cols)
	sc := make([]float32, ceilDiv(rows, kernels.FP8Block)*ceilDiv(cols, kernels.FP8Block))
	poison(codes)
	poison(F32Bytes(sc))
	return codes, sc
}

func fp8Parity(b Backend, x []float32, rows, cols int) error {
	wc, ws := fp8Out(rows, cols)
	gc, gs := fp8Out(rows, cols)
	ew := kernels.CPU{}.QuantizeFP8Block(wc, ws, x, rows, cols)
	eg := b.QuantizeFP8Block(gc, gs, x, rows, cols)
	if err := sameErr(ew, eg); err != nil || ew != nil {
		return err
	}
	if err := diffBytes("fp8 codes", wc, gc); err != nil {
		return err
	}
	return diffBytes("fp8 scales", F32Bytes(ws), F32Bytes(gs))
}

// fp8Edges puts in each 128×128 block one kind of edge: an all-zero block, a block whose
// absmax is subnormal (scale 0 → 1), values at rounding midpoints of e4m3, and the largest
// float32 values.
func fp8Edges(b Backend, rng *rand.Rand) error {
	rows, cols := 256, 640
	x := fill(rng, rows*cols, distNormal)
	set := func(bi, bj int, f func(r, c int) float32) {
		for r := bi * kernels.FP8Block; r < min(rows, (bi+1)*kernels.FP8Block); r++ {
			for c := bj * kernels.FP8Block; c < min(cols, (bj+1)*kernels.FP8Block); c++ {
				x[r*cols+c] = f(r, c)
			}
		}
	}
	set(0, 0, func(int, int) float32 { return 0 })
	set(0, 1, func(r, c int) float32 { return math.Float32frombits(uint32(rng.IntN(4))) * float32(1-2*(c&1)) })
	set(0, 2, func(r, c int) float32 {
		// Midpoints between neighbouring e4m3 values once divided by the scale (absmax 448 → 1).
		k := rng.IntN(0x7e)
		lo, hi := floatcodec.F8E4M3ToFloat32(uint8(k)), floatcodec.F8E4M3ToFloat32(uint8(k+1))
		if r == 0 && c == 2*kernels.FP8Block {
			return 448
		}
		return (lo + hi) / 2
	})
	set(1, 0, func(int, int) float32 { return math.MaxFloat32 * float32(rng.Float64()) })
	set(1, 1, func(int, int) float32 { return -math.SmallestNonzeroFloat32 })
	return fp8Parity(b, x, rows, cols)
}

func fp8NonFinite(b Backend, rng *rand.Rand) error {
	bads := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for t := range 4 {
		rows, cols := 2560, 2048 // two chunks
		x := fill(rng, rows*cols, distNormal)
		plant(rng, x, bads, t%2 == 1)
		wc, ws := fp8Out(rows, cols)
		gc, gs := fp8Out(rows, cols)
		ew := kernels.CPU{}.QuantizeFP8Block(wc, ws, x, rows, cols)
		eg := b.QuantizeFP8Block(gc, gs, x, rows, cols)
		if ew == nil {
			return errors.New("cpu accepted a non-finite input")
		}
		if err := sameErr(ew, eg); err != nil {
			return err
		}
	}
	return nil
}
