package convert_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/quantize/convert"
)

// BenchmarkPipeline measures what a conversion moves per second of source, with the null
// backend (kernels.Null: no decoding, quantizing or error sums, so reading, scheduling, writing,
// checksums and the journal alone) beside the CPU backend, on one and two workers. The source is
// a generated DeepSeek-style FP8 checkpoint of 256 MiB, or the checkpoint PDQ_BENCH_SOURCE names;
// the outputs go to a temporary directory, or under PDQ_BENCH_OUT (a tmpfs such as /dev/shm takes
// the disk out of the measurement).
// Besides the throughput (MB/s of source) it reports process CPU time per source weight:
//
//	go test ./quantize/convert -run '^$' -bench Pipeline -benchtime 3x
func BenchmarkPipeline(b *testing.B) {
	p := plan(b, convert.BenchSource(b), convert.Options{GroupSize: 32, Method: quantize.MethodRTN})
	bytes, weights := p.InputBytes(), sourceWeights(p)
	for _, be := range []kernels.Backend{kernels.Null{}, kernels.CPU{}} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", be.Name(), workers), func(b *testing.B) {
				b.SetBytes(bytes)
				var cpu int64
				for i := 0; i < b.N; i++ {
					out := filepath.Join(b.TempDir(), "out")
					if dir := os.Getenv("PDQ_BENCH_OUT"); dir != "" {
						out = filepath.Join(dir, fmt.Sprintf("pdq-bench-out-%d", os.Getpid()))
					}
					t0 := convert.CPUNanos()
					if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Workers: workers, Backend: be}); err != nil {
						b.Fatal(err)
					}
					cpu += convert.CPUNanos() - t0
					b.StopTimer()
					os.RemoveAll(out)
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu)/float64(b.N)/float64(weights), "cpu-ns/weight")
			})
		}
	}
}

// sourceWeights counts the elements of the tensors a plan reads.
func sourceWeights(p *convert.Plan) int64 {
	var n int64
	for _, m := range p.Modules {
		n += m.Weight.NumElements()
	}
	return n
}
