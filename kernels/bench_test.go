package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The kernel benchmarks of docs/QUALITY.md, per loop set, in ns per weight on one core:
//
//	GOEXPERIMENT=simd go test ./kernels -run '^$' -bench Kernel -cpu 1
//
// Each runs over a 256×2048 slab of Gaussian weights with a heavy tail.

const benchRows, benchCols = 256, 2048

func benchSlab() []float32 {
	r := rand.New(rand.NewPCG(21, 22))
	x := make([]float32, benchRows*benchCols)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * 0.02
		if r.IntN(500) == 0 {
			x[i] *= 8
		}
	}
	return x
}

// eachSIMD runs f as a sub-benchmark for every loop set, and for AVX2 and AVX-512 once more as
// "avx2-pergroup" and "avx512-pergroup" with the batched search (eight or sixteen groups at
// once) switched off, so that one run shows both.
func eachSIMD(b *testing.B, f func(b *testing.B)) {
	for _, set := range loopSets {
		b.Run(set.name, func(b *testing.B) {
			prev, _ := SetSIMD(set.name)
			defer SetSIMD(prev)
			f(b)
		})
		if set.name == "avx512" || set.name == "avx2" {
			b.Run(set.name+"-pergroup", func(b *testing.B) {
				prev, _ := SetSIMD(set.name)
				noBatchSearch = true
				defer func() { SetSIMD(prev); noBatchSearch = false }()
				f(b)
			})
		}
	}
}

// perWeight reports the wall and the CPU time per weight of the b.N loops run since cpu0
// (cpuTime() before the loop); on a shared machine the CPU time is the figure to compare.
func perWeight(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/weight")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/weight")
}

// BenchmarkKernelInt4 is what convert does per INT4 slab: quantize (search, pack, group
// stats) and the error sums of the bytes written.
func BenchmarkKernelInt4(b *testing.B) {
	x := benchSlab()
	d := make([]float32, benchCols)
	r := rand.New(rand.NewPCG(23, 24))
	for i := range d {
		d[i] = float32(math.Exp(r.NormFloat64()))
	}
	for _, c := range []struct {
		name     string
		g        int
		search   Search
		weighted bool
	}{
		{"rtn-g32", 32, SearchRTN, false},
		{"mse-g32", 32, SearchMSE, false},
		{"mse-g128", 128, SearchMSE, false},
		{"weighted-g32", 32, SearchMSE, true},
		{"weighted-g128", 128, SearchMSE, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := mustParams(b, c.g, c.search, false)
			ng := len(x) / c.g
			out := Int4Out{Packed: make([]byte, len(x)/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
			scales := make([]float32, ng)
			eachSIMD(b, func(b *testing.B) {
				cpu0 := cpuTime()
				for b.Loop() {
					var err error
					if c.weighted {
						err = CPU{}.QuantizeInt4Weighted(out, x, benchRows, benchCols, p, d)
					} else {
						err = CPU{}.QuantizeInt4(out, x, benchRows, benchCols, p)
					}
					if err != nil {
						b.Fatal(err)
					}
					for i := range scales {
						scales[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(out.Scales[2*i:])) << 16)
					}
					if _, err := (CPU{}).ErrorSumsInt4(x, out.Packed, scales, benchRows, benchCols, c.g, 0); err != nil {
						b.Fatal(err)
					}
				}
				perWeight(b, len(x), cpu0)
			})
		})
	}
}

// BenchmarkKernelFP8 is the FP8 prefill path of a BF16 source (block quantize and the error
// sums of the codes written) and the decode of an FP8-block source.
func BenchmarkKernelFP8(b *testing.B) {
	x := benchSlab()
	codes := make([]byte, len(x))
	scales := make([]float32, ceilDiv(benchRows, FP8Block)*ceilDiv(benchCols, FP8Block))
	b.Run("block-quantize+sums", func(b *testing.B) {
		eachSIMD(b, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				if err := (CPU{}).QuantizeFP8Block(codes, scales, x, benchRows, benchCols); err != nil {
					b.Fatal(err)
				}
				if _, err := (CPU{}).ErrorSumsFP8Block(x, codes, scales, benchRows, benchCols, FP8Block, FP8Block, 0); err != nil {
					b.Fatal(err)
				}
			}
			perWeight(b, len(x), cpu0)
		})
	})
	b.Run("e4m3-decode", func(b *testing.B) {
		dst := make([]float32, len(x))
		eachSIMD(b, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				if err := (CPU{}).DequantizeFP8Block(dst, codes, scales, benchRows, benchCols, FP8Block, FP8Block); err != nil {
					b.Fatal(err)
				}
			}
			perWeight(b, len(x), cpu0)
		})
	})
}

// BenchmarkKernelParts times the two halves of KernelInt4/rtn-g32 and KernelFP8/block-quantize+sums
// apart: the quantization, then the error sums of its output.
func BenchmarkKernelParts(b *testing.B) {
	x := benchSlab()
	p := mustParams(b, 32, SearchRTN, false)
	ng := len(x) / 32
	out := Int4Out{Packed: make([]byte, len(x)/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
	scales := make([]float32, ng)
	codes := make([]byte, len(x))
	fscales := make([]float32, ceilDiv(benchRows, FP8Block)*ceilDiv(benchCols, FP8Block))
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"rtn-g32-quantize", func() error { return CPU{}.QuantizeInt4(out, x, benchRows, benchCols, p) }},
		{"rtn-g32-both", func() error {
			if err := (CPU{}).QuantizeInt4(out, x, benchRows, benchCols, p); err != nil {
				return err
			}
			_, err := CPU{}.ErrorSumsInt4(x, out.Packed, scales, benchRows, benchCols, 32, 0)
			return err
		}},
		{"rtn-g32-sums", func() error {
			_, err := CPU{}.ErrorSumsInt4(x, out.Packed, scales, benchRows, benchCols, 32, 0)
			return err
		}},
		{"fp8-block-quantize", func() error { return CPU{}.QuantizeFP8Block(codes, fscales, x, benchRows, benchCols) }},
		{"fp8-block-both", func() error {
			if err := (CPU{}).QuantizeFP8Block(codes, fscales, x, benchRows, benchCols); err != nil {
				return err
			}
			_, err := CPU{}.ErrorSumsFP8Block(x, codes, fscales, benchRows, benchCols, FP8Block, FP8Block, 0)
			return err
		}},
		{"fp8-block-sums", func() error {
			_, err := CPU{}.ErrorSumsFP8Block(x, codes, fscales, benchRows, benchCols, FP8Block, FP8Block, 0)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := (CPU{}).QuantizeInt4(out, x, benchRows, benchCols, p); err != nil {
				b.Fatal(err)
			}
			for i := range scales {
				scales[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(out.Scales[2*i:])) << 16)
			}
			if err := (CPU{}).QuantizeFP8Block(codes, fscales, x, benchRows, benchCols); err != nil {
				b.Fatal(err)
			}
			eachSIMD(b, func(b *testing.B) {
				cpu0 := cpuTime()
				for b.Loop() {
					if err := c.f(); err != nil {
						b.Fatal(err)
					}
				}
				perWeight(b, len(x), cpu0)
			})
		})
	}
}
