package kernels

import "testing"

// BenchmarkKernelFP4 is BenchmarkKernelInt4 for the FP4 formats: quantize (search, pack, group
// stats) and the error sums of the bytes written, on the same slab.
//
//	GOEXPERIMENT=simd go test ./kernels -run '^$' -bench 'FP4|KernelInt4' -cpu 1
func BenchmarkKernelFP4(b *testing.B) {
	x := benchSlab()
	g := NVFP4GlobalScale(maxAbs(x))
	for _, c := range []struct {
		name   string
		gs     int
		search Search
	}{
		{"nvfp4-rtn", NVFP4GroupSize, SearchRTN},
		{"nvfp4-mse", NVFP4GroupSize, SearchMSE},
		{"mxfp4-rtn", MXFP4GroupSize, SearchRTN},
		{"mxfp4-mse", MXFP4GroupSize, SearchMSE},
	} {
		b.Run(c.name, func(b *testing.B) {
			ng := len(x) / c.gs
			out := FP4Out{Packed: make([]byte, len(x)/2), Scales: make([]byte, ng), Stats: make([]GroupStats, ng)}
			scales := make([]float32, ng)
			eachSIMD(b, func(b *testing.B) {
				cpu0 := cpuTime()
				for b.Loop() {
					var err error
					if c.gs == NVFP4GroupSize {
						err = QuantizeNVFP4(out, x, benchRows, benchCols, g, c.search)
						NVFP4Scales(scales, out.Scales, g)
					} else {
						err = QuantizeMXFP4(out, x, benchRows, benchCols, c.search)
						MXFP4Scales(scales, out.Scales)
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := (CPU{}).ErrorSumsFP4(x, out.Packed, scales, benchRows, benchCols, c.gs, 0); err != nil {
						b.Fatal(err)
					}
				}
				perWeight(b, len(x), cpu0)
			})
		})
	}
}

// BenchmarkFP4Parts times the parts of BenchmarkKernelFP4 apart on the same slab: the quantizer
// alone, the effective scales of the codes, the error sums of the bytes and the dequantization.
func BenchmarkFP4Parts(b *testing.B) {
	x := benchSlab()
	g := NVFP4GlobalScale(maxAbs(x))
	for _, gs := range []int{NVFP4GroupSize, MXFP4GroupSize} {
		name := map[int]string{NVFP4GroupSize: "nvfp4", MXFP4GroupSize: "mxfp4"}[gs]
		ng := len(x) / gs
		out := FP4Out{Packed: make([]byte, len(x)/2), Scales: make([]byte, ng), Stats: make([]GroupStats, ng)}
		scales := make([]float32, ng)
		quant := func(s Search) error {
			if gs == NVFP4GroupSize {
				return QuantizeNVFP4(out, x, benchRows, benchCols, g, s)
			}
			return QuantizeMXFP4(out, x, benchRows, benchCols, s)
		}
		setScales := func() {
			if gs == NVFP4GroupSize {
				NVFP4Scales(scales, out.Scales, g)
			} else {
				MXFP4Scales(scales, out.Scales)
			}
		}
		if err := quant(SearchRTN); err != nil {
			b.Fatal(err)
		}
		setScales()
		dst := make([]float32, len(x))
		for _, part := range []struct {
			name string
			f    func() error
		}{
			{"rtn", func() error { return quant(SearchRTN) }},
			{"mse", func() error { return quant(SearchMSE) }},
			{"scales", func() error { setScales(); return nil }},
			{"errsums", func() error {
				_, err := (CPU{}).ErrorSumsFP4(x, out.Packed, scales, benchRows, benchCols, gs, 0)
				return err
			}},
			{"dequant", func() error { return DequantizeFP4(dst, out.Packed, scales, benchRows, benchCols, gs) }},
		} {
			b.Run(name+"-"+part.name, func(b *testing.B) {
				eachSIMD(b, func(b *testing.B) {
					cpu0 := cpuTime()
					for b.Loop() {
						if err := part.f(); err != nil {
							b.Fatal(err)
						}
					}
					perWeight(b, len(x), cpu0)
				})
			})
		}
	}
}
