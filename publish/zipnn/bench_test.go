package zipnn

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// Benchmarks per dtype on 32 MiB of synthetic weights; "ratio" is raw/stored. Run one core with
// -cpu 1 to compare with single-core figures.
func benchData(name string) []byte {
	const n = 32 << 20
	switch name {
	case "BF16":
		return bf16Normal(n/2, 31)
	case "FP8":
		return fp8Normal(n, 32)
	}
	return int4Packed(2*n, 33)
}

var benchKinds = map[string]Kind{"BF16": KindBF16, "FP8": KindBytes, "INT4": KindBytes}

func BenchmarkCompress(b *testing.B) {
	for _, name := range []string{"BF16", "FP8", "INT4"} {
		b.Run(name, func(b *testing.B) {
			raw := benchData(name)
			plan := []Segment{{0, int64(len(raw)), benchKinds[name]}}
			w := &memWriterAt{b: make([]byte, 0, len(raw)+len(raw)/10)}
			var st Stats
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				w.b = w.b[:0]
				var err error
				st, err = Compress(context.Background(), w, bytes.NewReader(raw), int64(len(raw)), plan, Options{})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(st.Ratio(), "ratio")
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	for _, name := range []string{"BF16", "FP8", "INT4"} {
		b.Run(name, func(b *testing.B) {
			raw := benchData(name)
			c, _ := compress(b, raw, []Segment{{0, int64(len(raw)), benchKinds[name]}}, 0)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decompress(context.Background(), io.Discard, bytes.NewReader(c), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
