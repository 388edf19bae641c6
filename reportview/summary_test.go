package reportview

import (
	"math"
	"testing"

	"pdq/quantize/report"
)

func TestSummarize(t *testing.T) {
	rows := []report.TensorReport{
		row("decode", "e0", "routed_experts", "int4", 20, 0.1),
		row("decode", "a0", "attention", "bf16", 55, 0.002),
		row("prefill", "e0", "routed_experts", "fp8-block", 31, 0.028),
		row("decode", "e1", "routed_experts", "int4", 18, 0.125),
		row("decode", "x", "mystery", "bf16", 50, 0.003),
		row("prefill", "a0", "attention", "fp8-block", math.Inf(1), 0),
	}
	rtn := report.Float(19)
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
