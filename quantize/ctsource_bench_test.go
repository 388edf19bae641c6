package quantize

import (
	"context"
	"testing"

	"pdq/quantize/qref"
	"pdq/safetensors"
)

// BenchmarkDecodePacked measures the source decoders on a slab of each already-quantized
// layout (pdq's own output as the source): what an INT4, NVFP4 or MXFP4 source costs before the
// FP8 prefill quantizer sees it.
//
//	GOEXPERIMENT=simd go test ./quantize -run '^$' -bench DecodePacked -cpu 1
func BenchmarkDecodePacked(b *testing.B) {
	w := benchWeights(qref.Gauss)
	ctx := context.Background()
	i4, err := QuantizeInt4(ctx, w, benchRows, benchCols, Int4Options{GroupSize: 32, Method: MethodRTN})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name   string
		layout PackedLayout
		slab   PackedSlab
	}{{"int4-g32", PackedLayout{Format: PackedInt4, Rows: benchRows, Cols: benchCols, GroupSize: 32, ScaleDType: safetensors.BF16},
		PackedSlab{Packed: i4.Packed, Scales: i4.Scales}}}
	for _, f := range []PackedFormat{PackedNVFP4, PackedMXFP4} {
		r, err := QuantizeFP4(ctx, w, benchRows, benchCols, FP4Options{Format: f, Method: MethodRTN})
		if err != nil {
			b.Fatal(err)
		}
		cases = append(cases, struct {
			name   string
			layout PackedLayout
			slab   PackedSlab
		}{f.String(), PackedLayout{Format: f, Rows: benchRows, Cols: benchCols, GroupSize: r.GroupSize},
			PackedSlab{Packed: r.Packed, Scales: r.Scales, Scale: r.Global}})
	}
	dst := make([]float32, len(w))
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.slab.Packed)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if err := c.layout.Decode(dst, benchRows, c.slab); err != nil {
					b.Fatal(err)
				}
			}
			perWeight(b, len(w), cpu0)
		})
	}
}
