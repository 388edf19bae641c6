package reportview

import (
	"math"
	"slices"
	"testing"

	"pdq/quantize/report"
)

func TestDiff(t *testing.T) {
	a := []report.TensorReport{
		row("decode", "e0", "routed_experts", "int4", 20.5, 0.09),
		row("decode", "e1", "routed_experts", "int4", 19, 0.11),
		row("prefill", "e0", "routed_experts", "fp8-block", 31, 0.028),
		row("decode", "att", "attention", "bf16", math.Inf(1), 0),
		row("decode", "onlyA", "attention", "bf16", 55, 0.002),
	}
	b := []report.TensorReport{
		row("decode", "onlyB", "attention", "bf16", 54, 0.002),
		row("decode", "e1", "routed_experts", "int4", 19.5, 0.105),
		row("decode", "att", "attention", "bf16", math.Inf(1), 0),
		row("decode", "e0", "routed_experts", "bf16", 50, 0.003), // another scheme, same module
		row("prefill", "e0", "routed_experts", "fp8-block", 31, 0.028),
	}
	cs, onlyA, onlyB := Diff(a, b)
	if got := tensorNames(onlyA); !slices.Equal(got, []string{"decode:onlyA.weight"}) {
		t.Fatalf("only in A: %q", got)
	}
	if got := tensorNames(onlyB); !slices.Equal(got, []string{"decode:onlyB.weight"}) {
		t.Fatalf("only in B: %q", got)
	}
	if len(cs) != 4 {
		t.Fatalf("%d changes, want 4", len(cs))
	}
	byMod := map[string]Change{}
	for _, c := range cs {
		byMod[c.Output+":"+c.Module] = c
	}
	if c := byMod["decode:e0"]; c.DeltaSQNR != -29.5 || c.SchemeA != "int4" || c.SchemeB != "bf16" {
		t.Fatalf("decode e0: %+v", c)
	}
	if c := byMod["decode:e1"]; c.DeltaSQNR != -0.5 || math.Abs(float64(c.DeltaRelRMSE)-0.005) > 1e-12 {
		t.Fatalf("decode e1: %+v", c)
	}
	if c := byMod["decode:att"]; c.DeltaSQNR != 0 {
		t.Fatalf("two exact tensors: Δ = %v, want 0", c.DeltaSQNR)
	}

	SortChanges(cs, SortSQNR)
	if got := []string{cs[0].Module, cs[1].Module}; !slices.Equal(got, []string{"e0", "e1"}) {
		t.Fatalf("biggest movers %q, want e0 then e1", got)
	}
	SortChanges(cs, SortName)
	var names []string
	for _, c := range cs {
		names = append(names, c.Output+":"+c.Tensor)
	}
	if want := []string{"prefill:e0.weight", "decode:att.weight", "decode:e0.weight_packed", "decode:e1.weight_packed"}; !slices.Equal(names, want) {
		t.Fatalf("by name %q, want %q", names, want)
	}

	rd := RoleDeltas(cs)
	if len(rd) != 3 {
		t.Fatalf("%d role groups, want 3: %+v", len(rd), rd)
	}
	if r := rd[0]; r.Output != "prefill" || r.Role != "routed_experts" || r.MeanDelta != 0 || r.Better+r.Worse != 0 {
		t.Fatalf("prefill experts: %+v", r)
	}
	if r := rd[1]; r.Role != "routed_experts" || r.Tensors != 2 || r.MeanDelta != -15 || r.MinDelta != -29.5 || r.MaxDelta != -0.5 ||
		r.Worse != 2 || r.MeanSQNRA != 19.75 || r.MeanSQNRB != 34.75 {
		t.Fatalf("decode experts: %+v", r)
	}
	if r := rd[2]; r.Role != "attention" || r.MeanDelta != 0 {
		t.Fatalf("decode attention: %+v", r)
	}
}

func TestCompareUsesFilters(t *testing.T) {
	a := &report.Report{Tensors: []report.TensorReport{expertRow(1, 0, "up_proj", 20), row("decode", "att", "attention", "bf16", 55, 0.002)}}
	b := &report.Report{Tensors: []report.TensorReport{expertRow(1, 0, "up_proj", 19), row("decode", "att", "attention", "bf16", 54, 0.002)}}
	v := NewView("a.json", a, Query{Roles: []string{"routed_experts"}}, NoThresholds)
	v.Compare("b.json", b)
	if n := len(v.Diff.Changes); n != 1 || len(v.Diff.OnlyA)+len(v.Diff.OnlyB) != 0 {
		t.Fatalf("%d changes, %d only in A, %d only in B; want the one expert", n, len(v.Diff.OnlyA), len(v.Diff.OnlyB))
	}
	if d := v.Diff.Changes[0].DeltaSQNR; d != 1 {
		t.Fatalf("Δ = %v, want +1 (A − B)", d)
	}
}
