package convert_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pdq/internal/synth"
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
	src := os.Getenv("PDQ_BENCH_SOURCE")
	if src == "" {
		src = filepath.Join(b.TempDir(), "src")
		o := synth.Options{Model: synth.Sized(synth.StyleDeepSeek, 256<<20, true), FP8: true, Seed: 1, MaxShardBytes: 128 << 20}
		if err := synth.Generate(context.Background(), src, o); err != nil {
			b.Fatal(err)
		}
	}
	p := plan(b, src, convert.Options{GroupSize: 32, Method: quantize.MethodRTN})
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
					t0 := cpuNanos()
					if _, err := convert.Run(context.Background(), p, out, convert.RunOptions{Workers: workers, Backend: be}); err != nil {
						b.Fatal(err)
					}
					cpu += cpuNanos() - t0
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

// cpuNanos is the process's user+system CPU time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestNullBackendMovesTheSameBytes: a conversion on kernels.Null writes the same files, of the
// same sizes, as a real one (what the pipeline benchmark measures is a real run's traffic), and
// the prefill copy of an FP8 source is the same bytes.
func TestNullBackendMovesTheSameBytes(t *testing.T) {
	src := deepseekSource(t)
	o := convert.Options{GroupSize: 32, MaxShardSize: 1 << 20, Method: quantize.MethodRTN}
	real, null := filepath.Join(t.TempDir(), "cpu"), filepath.Join(t.TempDir(), "null")
	convertTo(t, src, real, o, convert.RunOptions{Workers: 2})
	convertTo(t, src, null, o, convert.RunOptions{Workers: 2, Backend: kernels.Null{}})
	a, b := outputFiles(t, real), outputFiles(t, null)
	delete(a, "report.json")
	delete(b, "report.json")
	if len(a) != len(b) {
		t.Fatalf("%d files from the CPU backend, %d from Null", len(a), len(b))
	}
	differ := 0
	for name, data := range a {
		if len(b[name]) != len(data) {
			t.Errorf("%s: %d bytes from the CPU backend, %d from Null", name, len(data), len(b[name]))
		}
		if string(b[name]) != string(data) {
			differ++
			if strings.HasPrefix(name, "prefill/") {
				t.Errorf("%s: the FP8 source's copy differs under Null", name)
			}
		}
	}
	if differ == 0 {
		t.Fatal("Null wrote the same bytes as the CPU backend: it did arithmetic")
	}
}
