package quantize

import (
	"context"
	"testing"
	"time"

	"pdq/quantize/qref"
	"pdq/safetensors"
)

// Benchmarks report ns/weight on one worker, and cpu-ns/weight, the process CPU time per weight,
// which stays meaningful when other work shares the cores; run with -cpu 1:
//
//	go test ./quantize -run '^$' -bench . -cpu 1

const benchRows, benchCols = 256, 4096

var benchData = map[qref.Dist][]float32{}

func benchWeights(d qref.Dist) []float32 {
	if w, ok := benchData[d]; ok {
		return w
	}
	w := qref.Synthetic(d, benchRows, benchCols, qref.Sigma, 1)
	benchData[d] = w
	return w
}

// perWeight reports the per-weight figures of a b.Loop benchmark over n weights whose loop
// started at process CPU time cpu0.
func perWeight(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/weight")
	if cpu := processCPU() - cpu0; cpu0 > 0 && cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/weight")
	}
}

func BenchmarkQuantizeInt4(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  Int4Options
	}{
		{"rtn/g32", Int4Options{GroupSize: 32, Method: MethodRTN}},
		{"rtn/g128", Int4Options{GroupSize: 128, Method: MethodRTN}},
		{"mse/g32", Int4Options{GroupSize: 32}},
		{"mse/g64", Int4Options{GroupSize: 64}},
		{"mse/g128", Int4Options{GroupSize: 128}},
		{"mse/channel", Int4Options{GroupSize: 0}},
		{"mse-signed/g32", Int4Options{GroupSize: 32, SignedScales: true}},
	} {
		for _, d := range []qref.Dist{qref.Gauss, qref.T4} {
			b.Run(c.name+"/"+string(d), func(b *testing.B) {
				w := benchWeights(d)
				opt := c.opt
				opt.Workers = 1
				b.SetBytes(int64(4 * len(w)))
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if _, err := QuantizeInt4(context.Background(), w, benchRows, benchCols, opt); err != nil {
						b.Fatal(err)
					}
				}
				perWeight(b, len(w), cpu0)
			})
		}
	}
}

func BenchmarkQuantizeFP8Block(b *testing.B) {
	w := benchWeights(qref.Gauss)
	b.SetBytes(int64(4 * len(w)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := QuantizeFP8Block(context.Background(), w, benchRows, benchCols, FP8Options{Workers: 1}); err != nil {
			b.Fatal(err)
		}
	}
	perWeight(b, len(w), cpu0)
}

func BenchmarkDequantizeInt4(b *testing.B) {
	w := benchWeights(qref.Gauss)
	r, err := QuantizeInt4(context.Background(), w, benchRows, benchCols, Int4Options{GroupSize: 32, Method: MethodRTN})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, len(w))
	b.SetBytes(int64(len(r.Packed)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if err := DequantizeInt4(dst, r.Packed, r.Scales, safetensors.BF16, benchRows, benchCols, 32); err != nil {
			b.Fatal(err)
		}
	}
	perWeight(b, len(w), cpu0)
}

func BenchmarkDequantizeFP8Block(b *testing.B) {
	w := benchWeights(qref.Gauss)
	r, err := QuantizeFP8Block(context.Background(), w, benchRows, benchCols, FP8Options{Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, len(w))
	b.SetBytes(int64(len(r.Data)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if err := DequantizeFP8Block(dst, r.Data, r.ScaleInv, benchRows, benchCols); err != nil {
			b.Fatal(err)
		}
	}
	perWeight(b, len(w), cpu0)
}

func BenchmarkMetricsAdd(b *testing.B) {
	w := benchWeights(qref.Gauss)
	got := benchWeights(qref.T4)
	b.SetBytes(int64(8 * len(w)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		var m Metrics
		m.Add(w, got, 0)
	}
	perWeight(b, len(w), cpu0)
}

// BenchmarkQuantizeInt4Measured times the band path of a conversion on one slab, quantization
// and error sums (Int4Bands, the slab one band): a test checkpoint's expert (512×1024, one
// slab) and a slab of a real model's expert (Kimi K2's 2048×7168 goes in slabs of 512 rows, 4 Mi
// values at most).
func BenchmarkQuantizeInt4Measured(b *testing.B) {
	for _, c := range []struct {
		name       string
		rows, cols int
	}{{"512x1024", 512, 1024}, {"512x7168", 512, 7168}} {
		b.Run("rtn/g32/"+c.name, func(b *testing.B) {
			w := qref.Synthetic(qref.Gauss, c.rows, c.cols, qref.Sigma, 1)
			opt := Int4Options{GroupSize: 32, Method: MethodRTN, Workers: 1}
			var dst Int4Result
			b.SetBytes(int64(4 * len(w)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				var m Metrics
				if err := measureWhole(&dst, w, c.rows, c.cols, opt, &m, 0); err != nil {
					b.Fatal(err)
				}
			}
			perWeight(b, len(w), cpu0)
		})
	}
}
