package reportview

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pdq/quantize/report"
)

func TestParseSortKey(t *testing.T) {
	for _, k := range SortKeys {
		if got, err := ParseSortKey(string(k)); err != nil || got != k {
			t.Errorf("ParseSortKey(%q) = %q, %v", k, got, err)
		}
	}
	if _, err := ParseSortKey("SQNR"); err == nil || !strings.Contains(err.Error(), "rel_rmse") {
		t.Errorf("unknown key: err = %v, want a list of the accepted keys", err)
	}
}

func TestSelect(t *testing.T) {
	rep := &report.Report{Tensors: []report.TensorReport{
		row("prefill", "model.layers.0.self_attn.o_proj", "attention", "fp8-block", 31, 0.03),
		row("decode", "model.layers.1.mlp.experts.0.up_proj", "routed_experts", "int4", 20, 0.1),
		row("decode", "model.layers.1.mlp.shared_experts.up_proj", "shared_experts", "bf16", 55, 0.002),
		row("prefill", "model.layers.1.mlp.experts.0.up_proj", "routed_experts", "fp8-block", 31.5, 0.027),
	}}
	for _, tc := range []struct {
		name string
		q    Query
		want []string // modules, in report order
	}{
		{"all", Query{}, []string{"model.layers.0.self_attn.o_proj", "model.layers.1.mlp.experts.0.up_proj", "model.layers.1.mlp.shared_experts.up_proj", "model.layers.1.mlp.experts.0.up_proj"}},
		{"output", Query{Output: "decode"}, []string{"model.layers.1.mlp.experts.0.up_proj", "model.layers.1.mlp.shared_experts.up_proj"}},
		{"roles", Query{Roles: []string{"attention", "shared_experts"}}, []string{"model.layers.0.self_attn.o_proj", "model.layers.1.mlp.shared_experts.up_proj"}},
		{"filter", Query{Filter: regexp.MustCompile(`experts\.0\.up_proj\.weight$`)}, []string{"model.layers.1.mlp.experts.0.up_proj"}},
		{"all filters", Query{Output: "decode", Roles: []string{"routed_experts"}, Filter: regexp.MustCompile(`layers\.1\.`)}, []string{"model.layers.1.mlp.experts.0.up_proj"}},
		{"nothing", Query{Output: "decode", Roles: []string{"attention"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range Select(rep, tc.q) {
				got = append(got, r.Module)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSortRows(t *testing.T) {
	rows := []report.TensorReport{
		row("decode", "b", "attention", "bf16", math.Inf(1), 0),
		row("decode", "a", "routed_experts", "int4", 19, 0.11),
		row("prefill", "c", "attention", "fp8-block", 31, 0.028),
		row("prefill", "a", "routed_experts", "fp8-block", 19, 0.11), // ties the decode row: prefill first
		row("decode", "d", "routed_experts", "int4", 18, 0.12),
	}
	rows[2].MaxAbsErr = 9 // the largest max error despite a good SQNR
	for _, tc := range []struct {
		key  SortKey
		want []string
	}{
		{SortSQNR, []string{"decode:d.weight_packed", "prefill:a.weight", "decode:a.weight_packed", "prefill:c.weight", "decode:b.weight"}},
		{SortRelRMSE, []string{"decode:d.weight_packed", "prefill:a.weight", "decode:a.weight_packed", "prefill:c.weight", "decode:b.weight"}},
		{SortMaxAbsErr, []string{"prefill:c.weight", "decode:d.weight_packed", "prefill:a.weight", "decode:a.weight_packed", "decode:b.weight"}},
		{SortName, []string{"prefill:a.weight", "prefill:c.weight", "decode:a.weight_packed", "decode:b.weight", "decode:d.weight_packed"}},
	} {
		t.Run(string(tc.key), func(t *testing.T) {
			// The order must not depend on the input order.
			for _, start := range [][]report.TensorReport{slices.Clone(rows), reversed(rows)} {
				SortRows(start, tc.key)
				if got := tensorNames(start); !slices.Equal(got, tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func reversed[T any](s []T) []T {
	c := slices.Clone(s)
	slices.Reverse(c)
	return c
}

func TestThresholds(t *testing.T) {
	rows := []report.TensorReport{
		row("decode", "ok", "routed_experts", "int4", 20, 0.1),
		row("decode", "edge", "routed_experts", "int4", 18, 0.125), // exactly at both limits: passes
		row("decode", "low", "routed_experts", "int4", 17.99, 0.12),
		row("decode", "rough", "routed_experts", "int4", 19, 0.13),
		row("decode", "both", "routed_experts", "int4", 17, 0.14),
		row("decode", "exact", "attention", "bf16", math.Inf(1), 0),
	}
	th := Thresholds{SQNRBelow: 18, RelRMSEAbove: 0.125}
	if !th.Active() || NoThresholds.Active() {
		t.Fatal("Active is wrong")
	}
	if got := NoThresholds.Check(rows); len(got) != 0 {
		t.Fatalf("no thresholds failed %d rows", len(got))
	}
	got := th.Check(rows)
	var names, reasons []string
	for _, f := range got {
		names = append(names, f.Module)
		reasons = append(reasons, strings.Join(f.Reasons, "; "))
	}
	if want := []string{"both", "low", "rough"}; !slices.Equal(names, want) {
		t.Fatalf("failed %q, want %q (worst SQNR first)", names, want)
	}
	if want := []string{"SQNR 17.00 dB < 18; rel RMSE 0.1400 > 0.125", "SQNR 17.99 dB < 18", "rel RMSE 0.1300 > 0.125"}; !slices.Equal(reasons, want) {
		t.Fatalf("reasons %q, want %q", reasons, want)
	}
	// Only the SQNR limit.
	if got := (Thresholds{SQNRBelow: 18, RelRMSEAbove: math.Inf(1)}).Check(rows); len(got) != 2 {
		t.Fatalf("SQNR limit alone failed %d rows, want 2", len(got))
	}
}

func TestFmtApart(t *testing.T) {
	for _, tc := range []struct {
		v, limit float64
		prec     int
		want     string
	}{
		{17.5, 18, 2, "17.50"},
		{18.1195, 18.12, 2, "18.119"},
		{18.11996, 18.12, 2, "18.11996"},
		{0.12433, 0.1243, 4, "0.12433"},
		{math.Inf(-1), 18, 2, "-inf"},
	} {
		if got := fmtApart(tc.v, tc.limit, tc.prec); got != tc.want {
			t.Errorf("fmtApart(%v, %v, %d) = %q, want %q", tc.v, tc.limit, tc.prec, got, tc.want)
		}
	}
}
