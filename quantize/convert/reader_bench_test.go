package convert

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"pdq/quantize"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// BenchmarkReader measures the reading of a conversion alone: every slab of the plan read as
// run's readers read it (into an aligned buffer, with the CRC-32C of each 1 MiB when the shard is
// copied to prefill/), by one goroutine and by two taking the slabs in turn, from the page cache
// after the first pass. A run with that many readers moves at most this many bytes of source per
// second however many workers it has (WorkersPerReader). The source is PDQ_BENCH_SOURCE or a
// generated 256 MiB FP8 checkpoint, as in BenchmarkPipeline:
//
//	PDQ_BENCH_SOURCE=CK go test ./quantize/convert -run '^$' -bench Reader -benchtime 5x
func BenchmarkReader(b *testing.B) {
	ck, err := safetensors.Open(BenchSource(b))
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
	copying := p.Output(KindPrefill) != nil && p.Output(KindPrefill).CopySource
	type piece struct {
		m *Module
		s *slab
	}
	var pieces []piece
	var bytes int64
	for _, m := range p.Modules {
		rows, _ := rowsOf(m)
		step := slabRows(m)
		for r0 := 0; r0 < max(rows, 1); r0 += step {
			pc := piece{m: m, s: &slab{r0: r0, r1: min(rows, r0+step)}}
			pc.s.ranges(m)
			pieces = append(pieces, pc)
			bytes += pc.s.wLen + pc.s.sLen
		}
	}
	for _, readers := range []int{1, 2} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			var raws rawBufs
			b.SetBytes(bytes)
			var cpu int64
			for b.Loop() {
				t0 := CPUNanos()
				var next atomic.Int64
				var wg sync.WaitGroup
				for range readers {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(len(pieces)); i = next.Add(1) - 1 {
							m, s := pieces[i].m, pieces[i].s
							raw, base := raws.get(s.wLen, m.Weight.Offset()+s.wOff)
							if _, err := readTensor(p.Source, m.Weight, raw, s.wOff, copying); err != nil {
								b.Error(err)
								return
							}
							if m.Scale != nil {
								if _, err := readTensor(p.Source, m.Scale, make([]byte, s.sLen), s.sOff, copying); err != nil {
									b.Error(err)
									return
								}
							}
							raws.put(base)
						}
					})
				}
				wg.Wait()
				cpu += CPUNanos() - t0
			}
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(bytes), "cpu-ns/byte")
		})
	}
}
