package reportview

import (
	"math"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

func TestSummarize(t *testing.T) {
	rows := []convert.TensorReport{
		row("decode", "e0", "routed_experts", "int4", 20, 0.1),
		row("decode", "a0", "attention", "bf16", 55, 0.002),
		row("prefill", "e0", "routed_experts", "fp8-block", 31, 0.028),
		row("decode", "e1", "routed_experts", "int4", 18, 0.125),
		row("decode", "x", "mystery", "bf16", 50, 0.003),
		row("prefill", "a0", "attention", "fp8-block", math.Inf(1), 0),
	}
	rtn := convert.Float(19)
	rows[0].RTNSQNR = &rtn
	gs := Summarize(rows)
	var order []string
	for _, g := range gs {
		order = append(order, g.Output+"/"+g.Role+"/"+g.Scheme)
	}
	want := []string{"prefill/routed_experts/fp8-block", "prefill/attention/fp8-block", "decode/routed_experts/int4", "decode/attention/bf16", "decode/mystery/bf16"}
	if len(order) != len(want) {
		t.Fatalf("groups %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("groups %q, want %q", order, want)
		}
	}
	g := gs[2]
	if g.Tensors != 2 || g.Elements != 2*256*128 || g.MeanSQNR != 19 || g.MinSQNR != 18 || g.WorstRelRMSE != 0.125 {
		t.Fatalf("decode experts: %+v", g)
	}
	if g.MeanRTNSQNR != nil {
		t.Fatalf("mean rtn over a group where one row lacks it: %v", *g.MeanRTNSQNR)
	}
	if g.Bytes != 2*(256*128/2+256*4*2+16) || g.BitsPerWeight() != 8*float64(g.Bytes)/float64(g.Elements) {
		t.Fatalf("decode experts: %d bytes, %.3f bits/w", g.Bytes, g.BitsPerWeight())
	}
	if a := gs[1]; !math.IsInf(float64(a.MeanSQNR), 1) || !math.IsInf(float64(a.MinSQNR), 1) || a.WorstRelRMSE != 0 {
		t.Fatalf("exact group: %+v", a)
	}
}

// TestStoredBytesMatchesPlan checks StoredBytes against the tensors the conversion plan lays out
// for each scheme.
func TestStoredBytesMatchesPlan(t *testing.T) {
	for _, tc := range []struct {
		scheme          convert.Scheme
		kind            string
		rows, cols      int
		group, reported int // plan group size, and what a report row records
		dtype           safetensors.DType
	}{
		{convert.SchemeInt4, "decode", 256, 128, 32, 32, safetensors.BF16},
		{convert.SchemeInt4, "decode", 2048, 7168, 128, 128, safetensors.F8E4M3},
		{convert.SchemeInt4, "decode", 96, 256, convert.PerChannel, -1, safetensors.BF16},
		{convert.SchemeFP8Block, "prefill", 300, 200, 32, 0, safetensors.BF16},
		{convert.SchemeFP8Block, "decode", 7168, 2048, 32, 0, safetensors.BF16},
		{convert.SchemeBF16, "decode", 1536, 7168, 32, 0, safetensors.F8E4M3},
	} {
		t.Run(string(tc.scheme)+"/"+tc.kind, func(t *testing.T) {
			w := &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "m.weight", DType: tc.dtype, Shape: []int64{int64(tc.rows), int64(tc.cols)}}}
			m := &convert.Module{Name: "m", Linear: true, Weight: w, Rows: tc.rows, Cols: tc.cols, Schemes: []convert.Scheme{tc.scheme, tc.scheme}}
			p := &convert.Plan{Options: convert.Options{GroupSize: tc.group}}
			var want int64
			for _, s := range p.OutputSpecs(m, convert.OutputKind(tc.kind)) {
				n := int64(1)
				for _, d := range s.Shape {
					n *= d
				}
				b, ok := s.DType.ByteSize(uint64(n))
				if !ok {
					t.Fatalf("%s: no size for %s", s.Name, s.DType)
				}
				want += int64(b)
			}
			r := convert.TensorReport{Output: tc.kind, Scheme: string(tc.scheme), GroupSize: tc.reported,
				Shape: w.Shape, Elements: int64(tc.rows * tc.cols), SourceDType: string(tc.dtype)}
			if got := StoredBytes(&r); got != want {
				t.Fatalf("StoredBytes = %d, plan lays out %d", got, want)
			}
		})
	}
}
