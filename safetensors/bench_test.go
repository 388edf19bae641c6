package safetensors

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// moeSpecs returns n tensors named and shaped like the routed experts of a DeepSeek-style model:
// FP8 weights with their F32 block scales.
func moeSpecs(n int) []TensorSpec {
	specs := make([]TensorSpec, 0, n)
	for i := 0; len(specs) < n; i++ {
		layer, expert := i/(256*3), i/3%256
		proj := []string{"gate_proj", "up_proj", "down_proj"}[i%3]
		base := fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s", layer, expert, proj)
		specs = append(specs,
			TensorSpec{base + ".weight", F8E4M3, []int64{2048, 7168}},
			TensorSpec{base + ".weight_scale_inv", F32, []int64{16, 56}})
	}
	return specs[:n]
}

// headerOnly is a ReaderAt over a file's prefix; the data buffer is never read by ParseHeader.
func headerOnly(b *testing.B, n int) (*bytes.Reader, int64) {
	l, err := ComputeLayout(moeSpecs(n), nil)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.NewReader(l.Prefix), l.FileSize
}

// BenchmarkParseHeader parses the header of a shard with 2000 tensors (about 200 KB of JSON);
// bytes/s is header bytes.
func BenchmarkParseHeader(b *testing.B) {
	r, size := headerOnly(b, 2000)
	b.SetBytes(r.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(r, size); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkComputeLayout renders the header of a 2000-tensor shard.
func BenchmarkComputeLayout(b *testing.B) {
	specs := moeSpecs(2000)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		l, err := ComputeLayout(specs, nil)
		if err != nil {
			b.Fatal(err)
		}
		n = len(l.Prefix)
	}
	b.SetBytes(int64(n))
}

// BenchmarkOpen opens a checkpoint of 16 sparse shards of 2000 tensors each (about 465 GB of
// declared data, a few MB on disk); bytes/s is header bytes.
func BenchmarkOpen(b *testing.B) {
	const shards, per = 16, 2000
	dir := b.TempDir()
	specs := moeSpecs(shards * per)
	var plans []ShardPlan
	var hdr int64
	for i := range shards {
		part := specs[i*per : (i+1)*per]
		l, err := ComputeLayout(part, nil)
		if err != nil {
			b.Fatal(err)
		}
		plans = append(plans, ShardPlan{FileName: ShardName(i+1, shards), Specs: part, Layout: l})
		f, err := os.Create(filepath.Join(dir, plans[i].FileName))
		if err != nil {
			b.Fatal(err)
		}
		if _, err = f.Write(l.Prefix); err == nil {
			err = f.Truncate(l.FileSize)
		}
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		hdr += l.DataStart()
	}
	if err := WriteIndex(dir, plans, nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(hdr)
	b.ReportAllocs()
	for b.Loop() {
		c, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
