package convert_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/quantize/report"
)

// BenchmarkDecodeFormats measures a decode-only conversion of BenchmarkPipeline's source (a
// generated DeepSeek-style FP8 checkpoint of 256 MiB, or PDQ_BENCH_SOURCE) in each decode format
// and method on one worker, with process CPU time per weight of the routed experts (the
// targets; the rest of the checkpoint is the same work in every format). NVFP4 includes its pass
// over gate and up for the global scales:
//
//	go test ./quantize/convert -run '^$' -bench DecodeFormats -benchtime 1x -cpu 1
func BenchmarkDecodeFormats(b *testing.B) {
	src := convert.BenchSource(b)
	for _, tc := range []struct {
		name string
		f    convert.DecodeFormat
		m    quantize.Method
	}{
		{"int4-rtn", convert.DecodeInt4, quantize.MethodRTN},
		{"int4-mse", convert.DecodeInt4, quantize.MethodMSE},
		{"nvfp4-rtn", convert.DecodeNVFP4, quantize.MethodRTN},
		{"nvfp4-mse", convert.DecodeNVFP4, quantize.MethodMSE},
		{"mxfp4-rtn", convert.DecodeMXFP4, quantize.MethodRTN},
		{"mxfp4-mse", convert.DecodeMXFP4, quantize.MethodMSE},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := plan(b, src, convert.Options{DecodeFormat: tc.f, Method: tc.m, Only: convert.KindDecode})
			var targets int64
			for _, m := range p.Modules {
				if f := report.Info(m.Scheme(convert.KindDecode)).Family; f == report.FamilyInt4 || f == report.FamilyFP4 {
					targets += m.Weight.NumElements()
				}
			}
			var cpu int64
			for i := 0; i < b.N; i++ {
				out := filepath.Join(b.TempDir(), "out")
				if dir := os.Getenv("PDQ_BENCH_OUT"); dir != "" {
					out = filepath.Join(dir, "pdq-bench-formats")
				}
				t0 := convert.CPUNanos()
				if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Workers: 1}); err != nil {
					b.Fatal(err)
				}
				cpu += convert.CPUNanos() - t0
				b.StopTimer()
				os.RemoveAll(out)
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(targets), "cpu-ns/target-weight")
		})
	}
}
