package calib_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/calib"
	"pdq/quantize"
	"pdq/safetensors"
)

// lowRankHessian returns a K×K symmetric positive definite matrix D^½(I/2 + F·Fᵀ/r)D^½ with
// log-normal D (σ_ln = 1) and r = 16 random factors: the structure of a real input Hessian at a
// cost of O(K²·r) to build.
func lowRankHessian(rng *rand.Rand, k int) []float64 {
	const r = 16
	d := make([]float64, k)
	f := make([]float64, k*r)
	for i := range d {
		d[i] = math.Exp(rng.NormFloat64() / 2)
	}
	for i := range f {
		f[i] = rng.NormFloat64()
	}
	h := make([]float64, k*k)
	for i := range k {
		for j := i; j < k; j++ {
			var s float64
			for l := range r {
				s += f[i*r+l] * f[j*r+l]
			}
			s /= r
			if i == j {
				s += 0.5
			}
			v := d[i] * d[j] * s
			h[i*k+j], h[j*k+i] = v, v
		}
	}
	return h
}

// BenchmarkGPTQExpert: one GLM-5 expert projection (gate/up 2048×6144, down 6144×2048), group 32:
// the Cholesky factorization of the Hessian, the weighted scale search and GPTQ, by this
// package (float32 kernels) and by the previous float64 implementation (legacy, gonum), in one
// run. Run on one core with -cpu 1 -benchtime 1x.
func BenchmarkGPTQExpert(b *testing.B) {
	for _, sh := range []struct{ rows, cols int }{{2048, 6144}, {6144, 2048}} {
		rng := rand.New(rand.NewPCG(1, 2))
		h := lowRankHessian(rng, sh.cols)
		d := make([]float32, sh.cols)
		for j := range d {
			d[j] = float32(h[j*sh.cols+j])
		}
		w := gaussF16(rng, sh.rows*sh.cols, 0.02)
		opt := quantize.Int4Options{GroupSize: 32, Workers: 1}
		for _, impl := range []string{"kernels", "legacy"} {
			b.Run(fmt.Sprintf("%dx%d/%s", sh.rows, sh.cols, impl), func(b *testing.B) {
				b.SetBytes(int64(4 * len(w)))
				b.ReportAllocs()
				cpu0 := processCPU()
				for range b.N {
					if impl == "legacy" {
						res, err := quantize.QuantizeInt4Weighted(context.Background(), w, sh.rows, sh.cols, opt, d)
						if err != nil {
							b.Fatal(err)
						}
						scales := make([]float32, len(res.Scales)/2)
						safetensors.DecodeBF16(scales, res.Scales)
						if _, ok := legacyGPTQ(h, sh.cols, w, sh.rows, scales, 32, false); !ok {
							b.Fatal("legacy factorization failed")
						}
						continue
					}
					f, err := calib.Factorize(context.Background(), h, sh.cols, calib.GPTQOptions{})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := calib.QuantizeGPTQ(context.Background(), w, sh.rows, sh.cols, opt, d, f); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(w)), "ns/weight")
				if cpu := processCPU() - cpu0; cpu0 > 0 && cpu > 0 {
					b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
				}
			})
		}
	}
}

// BenchmarkFactorize: the factorization alone for K = 6144 and 2048, this package's and the
// previous float64 one's (legacy).
func BenchmarkFactorize(b *testing.B) {
	for _, k := range []int{2048, 6144} {
		h := lowRankHessian(rand.New(rand.NewPCG(1, 2)), k)
		for _, impl := range []string{"kernels", "legacy"} {
			b.Run(fmt.Sprintf("%d/%s", k, impl), func(b *testing.B) {
				cpu0 := processCPU()
				for range b.N {
					if impl == "legacy" {
						if _, _, ok := legacyFactorize(h, k, false); !ok {
							b.Fatal("legacy factorization failed")
						}
					} else if _, err := calib.Factorize(context.Background(), h, k, calib.GPTQOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				if cpu := processCPU() - cpu0; cpu0 > 0 && cpu > 0 {
					b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
				}
			})
		}
	}
}

// BenchmarkSearch: the plain and the weighted scale search on one 2048×6144 projection, group 32.
func BenchmarkSearch(b *testing.B) {
	rows, cols := 2048, 6144
	rng := rand.New(rand.NewPCG(1, 2))
	w := gaussF16(rng, rows*cols, 0.02)
	d := logNormal(rng, cols, 1)
	opt := quantize.Int4Options{GroupSize: 32, Workers: 1}
	for _, weighted := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "weighted"}[weighted], func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			b.ReportAllocs()
			for range b.N {
				var err error
				if weighted {
					_, err = quantize.QuantizeInt4Weighted(context.Background(), w, rows, cols, opt, d)
				} else {
					_, err = quantize.QuantizeInt4(context.Background(), w, rows, cols, opt)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(w)), "ns/weight")
		})
	}
}
