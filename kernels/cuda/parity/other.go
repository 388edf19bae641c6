//go:build cuda || cudaemu

package parity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"pdq/internal/floatcodec"
	"pdq/kernels"
)

func otherCases() []ParityCase {
	cs := []ParityCase{
		{Name: "dequant-int4", Run: dequantInt4Parity},
		{Name: "decode/bf16", Run: func(b Backend, rng *rand.Rand) error { return decodeParity(b, rng, kernels.BF16) }},
		{Name: "decode/f16", Run: func(b Backend, rng *rand.Rand) error { return decodeParity(b, rng, kernels.F16) }},
		{Name: "error-sums", Run: errSumsParity},
		{Name: "concurrent-int4", Run: concurrentParity},
	}
	for _, sh := range [][4]int{
		{300, 520, 128, 128}, {4200, 1100, 128, 128}, {4200, 1100, 100, 128}, // the last two: two chunks
		{77, 300, 1, 300}, {77, 300, 77, 300}, {1, 1, 1, 1},
	} {
		cs = append(cs, ParityCase{
			Name: fmt.Sprintf("dequant-fp8/%dx%d/%dx%d", sh[0], sh[1], sh[2], sh[3]),
			Run: func(b Backend, rng *rand.Rand) error {
				return dequantFP8Parity(b, rng, sh[0], sh[1], sh[2], sh[3])
			},
		})
	}
	return cs
}

func poisonF32(n int) []float32 {
	f := make([]float32, n)
	poison(F32Bytes(f))
	return f
}

// randScales draws scales: BF16 values, arbitrary float32 values, signed ones, zero.
func randScales(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		v := float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-30))
		switch rng.IntN(4) {
		case 0:
			v = floatcodec.RoundBF16(v)
		case 1:
			v = 0
		}
		s[i] = v
	}
	return s
}

func dequantInt4Parity(b Backend, rng *rand.Rand) error {
	for _, sh := range [][3]int{{1, 8, 8}, {13, 256, 32}, {7, 1024, 64}, {5, 768, 128}, {4, 7168, 7168}, {4500, 1024, 32}} {
		rows, cols, g := sh[0], sh[1], sh[2]
		n := rows * cols
		packed := make([]byte, n/2)
		for i := range packed {
			packed[i] = byte(rng.Uint32())
		}
		scales := randScales(rng, n/g)
		want, got := poisonF32(n), poisonF32(n)
		if err := sameErr(kernels.CPU{}.DequantizeInt4(want, packed, scales, rows, cols, g), b.DequantizeInt4(got, packed, scales, rows, cols, g)); err != nil {
			return err
		}
		if err := diffBytes(fmt.Sprintf("int4 %dx%d g%d values", rows, cols, g), F32Bytes(want), F32Bytes(got)); err != nil {
			return err
		}
	}
	return nil
}

func dequantFP8Parity(b Backend, rng *rand.Rand, rows, cols, bh, bw int) error {
	n := rows * cols
	codes := make([]byte, n)
	for i := range codes {
		codes[i] = byte(rng.Uint32()) // NaN codes included: they must decode to the same NaN
	}
	scale := randScales(rng, ceilDiv(rows, bh)*ceilDiv(cols, bw))
	want, got := poisonF32(n), poisonF32(n)
	if err := sameErr(kernels.CPU{}.DequantizeFP8Block(want, codes, scale, rows, cols, bh, bw), b.DequantizeFP8Block(got, codes, scale, rows, cols, bh, bw)); err != nil {
		return err
	}
	return diffBytes("fp8 values", F32Bytes(want), F32Bytes(got))
}

func decodeParity(b Backend, rng *rand.Rand, dt kernels.DType) error {
	n := 5<<20 + 3 // two chunks and a ragged end
	src := make([]byte, 2*n)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for i := range 1 << 16 { // every code once
		src[2*i], src[2*i+1] = byte(i), byte(i>>8)
	}
	want, got := poisonF32(n), poisonF32(n)
	if err := sameErr(kernels.DecodeDense(want, src, dt), b.DecodeDense(got, src, dt)); err != nil {
		return err
	}
	return diffBytes(dt.String()+" values", F32Bytes(want), F32Bytes(got))
}

// errSumsParity: ErrorSums is the CPU's; ErrorSumsChunked stays within its bound with the
// same maximum and index.
func errSumsParity(b Backend, rng *rand.Rand) error {
	for _, n := range []int{0, 1, 255, 257, 5<<20 + 11} {
		ref := fill(rng, n, distHeavy)
		got := make([]float32, n)
		for i, v := range ref {
			got[i] = floatcodec.RoundBF16(v)
		}
		if n > 300 {
			got[n/3] += 1 // a tie for the maximum would be ambiguous; make one clear winner,
			got[n-5] += 2 // past the first pipeline chunk
		}
		want := kernels.CPU{}.ErrorSums(ref, got, 1000)
		if g := b.ErrorSums(ref, got, 1000); g != want {
			return fmt.Errorf("n=%d: ErrorSums %+v, want %+v", n, g, want)
		}
		g, err := b.ErrorSumsChunked(ref, got, 1000)
		if err != nil {
			return err
		}
		if g.N != want.N || g.MaxAbsErr != want.MaxAbsErr || g.MaxAbsIdx != want.MaxAbsIdx {
			return fmt.Errorf("n=%d: chunked N/max/index %d %v %d, want %d %v %d", n, g.N, g.MaxAbsErr, g.MaxAbsIdx, want.N, want.MaxAbsErr, want.MaxAbsIdx)
		}
		var absDot float64
		for i := range ref {
			absDot += math.Abs(float64(ref[i]) * float64(got[i]))
		}
		for _, c := range []struct {
			name         string
			got, want, a float64
		}{
			{"SumSqRef", g.SumSqRef, want.SumSqRef, want.SumSqRef},
			{"SumSqErr", g.SumSqErr, want.SumSqErr, want.SumSqErr},
			{"SumAbsErr", g.SumAbsErr, want.SumAbsErr, want.SumAbsErr},
			{"Dot", g.Dot, want.Dot, absDot},
			{"SumSqGot", g.SumSqGot, want.SumSqGot, want.SumSqGot},
		} {
			if d := math.Abs(c.got - c.want); d > ErrSumsBound(n, c.a) {
				return fmt.Errorf("n=%d: chunked %s %v, cpu %v: difference %g above the bound %g", n, c.name, c.got, c.want, d, ErrSumsBound(n, c.a))
			}
		}
	}
	return nil
}

// concurrentParity runs QuantizeInt4 from more goroutines than the backend has slots.
func concurrentParity(b Backend, rng *rand.Rand) error {
	p, err := kernels.NewInt4Params(32, kernels.SearchMSE, false)
	if err != nil {
		return err
	}
	const workers = 12
	xs := make([][]float32, workers)
	for i := range xs {
		xs[i] = fill(rng, 64*2048, dist(i%int(distCount)))
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { errs[i] = int4Parity(b, xs[i], 64, 2048, &p) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("goroutine %d: %w", i, err)
		}
	}
	return nil
}
