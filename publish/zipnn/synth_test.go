package zipnn

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"pdq/internal/floatcodec"
)

// Synthetic weights shaped like real checkpoints: N(0, 0.02) BF16, FP8 e4m3 with one scale per
// block of 16384 values (absmax to 448), INT4 groups of 32 (absmax to 7) packed two per byte.

func normals(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	return x
}

func bf16Normal(n int, seed uint64) []byte {
	b := make([]byte, 2*n)
	for i, v := range normals(n, seed) {
		binary.LittleEndian.PutUint16(b[2*i:], floatcodec.Float32ToBF16(v))
	}
	return b
}

func absmax(x []float32) float32 {
	m := float32(0)
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

func fp8Normal(n int, seed uint64) []byte {
	x := normals(n, seed)
	b := make([]byte, n)
	for o := 0; o < n; o += 16384 {
		blk := x[o:min(n, o+16384)]
		s := absmax(blk) / 448
		for i, v := range blk {
			b[o+i] = floatcodec.Float32ToF8E4M3(v / s)
		}
	}
	return b
}

func int4Packed(n int, seed uint64) []byte { // n values, n/2 bytes
	x := normals(n, seed)
	b := make([]byte, n/2)
	for o := 0; o < n; o += 32 {
		g := x[o:min(n, o+32)]
		s := absmax(g) / 7
		for i, v := range g {
			q := int(math.Round(float64(v / s)))
			q = max(-8, min(7, q))
			j := o + i
			b[j/2] |= byte(q+8) << (4 * (j % 2))
		}
	}
	return b
}

// safetensorsFile builds a file holding the named tensors (dtype, bytes) in name order.
func safetensorsFile(tensors map[string][2]any) []byte {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, n := range names {
		dt, b := tensors[n][0].(string), tensors[n][1].([]byte)
		elems := len(b)
		switch dt {
		case "BF16":
			elems /= 2
		case "I32":
			elems /= 4
		}
		hdr[n] = map[string]any{"dtype": dt, "shape": []int{elems}, "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	js, _ := json.Marshal(hdr)
	if pad := len(js) % 8; pad != 0 {
		js = append(js, strings.Repeat(" ", 8-pad)...)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	out = append(out, js...)
	return append(out, data...)
}
