package safetensors_test

import (
	"fmt"
	"os"
	"path/filepath"

	"pdq/safetensors"
)

// Write a two-tensor checkpoint in one shard with an index, then open it and read a tensor back.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	specs := []safetensors.TensorSpec{
		{Name: "w", DType: safetensors.BF16, Shape: []int64{2, 2}},
		{Name: "b", DType: safetensors.F32, Shape: []int64{2}},
	}
	plans, err := safetensors.PlanShards(specs, 1<<30, map[string]string{"format": "pt"})
	if err != nil {
		panic(err)
	}
	for _, p := range plans {
		w, err := safetensors.Create(filepath.Join(dir, p.FileName), p.Layout)
		if err != nil {
			panic(err)
		}
		w.WriteTensor("w", []byte{0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40}) // 1, 2, 3, 4
		w.WriteTensor("b", make([]byte, 8))
		if err := w.Close(); err != nil { // renamed to its final name only when complete
			panic(err)
		}
	}
	if err := safetensors.WriteIndex(dir, plans, nil); err != nil {
		panic(err)
	}

	ck, err := safetensors.Open(dir)
	if err != nil {
		panic(err)
	}
	defer ck.Close()
	t := ck.Tensor("w")
	raw := make([]byte, t.ByteSize())
	if err := ck.ReadTensor(t, raw); err != nil {
		panic(err)
	}
	vals := make([]float32, t.NumElements())
	safetensors.DecodeFloat32(vals, raw, t.DType)
	fmt.Println(len(ck.Shards), "shard;", t.Name, t.DType, t.Shape, vals)
	// Output: 1 shard; w BF16 [2 2] [1 2 3 4]
}
