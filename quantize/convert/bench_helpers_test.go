package convert

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"pdq/synth"
)

// BenchSource returns the checkpoint the pipeline benchmarks read: PDQ_BENCH_SOURCE, or a
// generated DeepSeek-style FP8 checkpoint of 256 MiB. (Exported for the package's external
// tests.)
func BenchSource(b *testing.B) string {
	if src := os.Getenv("PDQ_BENCH_SOURCE"); src != "" {
		return src
	}
	src := filepath.Join(b.TempDir(), "src")
	o := synth.Options{Model: synth.Sized(synth.StyleDeepSeek, 256<<20, true), FP8: true, Seed: 1, MaxShardBytes: 128 << 20}
	if err := synth.Generate(context.Background(), src, o); err != nil {
		b.Fatal(err)
	}
	return src
}

// CPUNanos is the process's user+system CPU time in nanoseconds (0 where it cannot be read).
func CPUNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
