package convert

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"pdq/internal/synth"
	"pdq/quantize"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// BenchmarkReader measures the single reader of a conversion alone: every slab of the plan read
// as run's reader reads it (into an aligned buffer, with the CRC-32C of each 1 MiB when the shard
// is copied to prefill/), on one goroutine, from the page cache after the first pass. A run moves
// at most this many bytes of source per second however many workers it has. The source is
// PDQ_BENCH_SOURCE or a generated 256 MiB FP8 checkpoint, as in BenchmarkPipeline:
//
//	PDQ_BENCH_SOURCE=CK go test ./quantize/convert -run '^$' -bench Reader -benchtime 5x
func BenchmarkReader(b *testing.B) {
	src := os.Getenv("PDQ_BENCH_SOURCE")
	if src == "" {
		src = filepath.Join(b.TempDir(), "src")
		o := synth.Options{Model: synth.Sized(synth.StyleDeepSeek, 256<<20, true), FP8: true, Seed: 1, MaxShardBytes: 128 << 20}
		if err := synth.Generate(context.Background(), src, o); err != nil {
			b.Fatal(err)
		}
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer ck.Close()
	cfg, err := rules.LoadConfig(ck.Dir)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPlan(ck, cfg, Options{GroupSize: 32, Method: quantize.MethodRTN})
	if err != nil {
		b.Fatal(err)
	}
	copying := p.Prefill != nil && p.Prefill.CopySource
	var raws rawBufs
	var bytes int64
	for _, m := range p.Modules {
		bytes += m.Weight.ByteSize()
		if m.Scale != nil {
			bytes += m.Scale.ByteSize()
		}
	}
	b.SetBytes(bytes)
	var cpu int64
	for b.Loop() {
		t0 := readerCPU()
		for _, m := range p.Modules {
			rows, _ := rowsOf(m)
			step := slabRows(m)
			for r0 := 0; r0 < max(rows, 1); r0 += step {
				s := &slab{r0: r0, r1: min(rows, r0+step)}
				s.ranges(m)
				s.raw, s.rawBase = raws.get(s.wLen, m.Weight.Offset()+s.wOff)
				if _, err := readTensor(p.Source, m.Weight, s.raw, s.wOff, copying); err != nil {
					b.Fatal(err)
				}
				if m.Scale != nil {
					scale := make([]byte, s.sLen)
					if _, err := readTensor(p.Source, m.Scale, scale, s.sOff, copying); err != nil {
						b.Fatal(err)
					}
				}
				raws.put(s.rawBase)
			}
		}
		cpu += readerCPU() - t0
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(bytes), "cpu-ns/byte")
}

// readerCPU is the process's user+system CPU time in nanoseconds.
func readerCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
