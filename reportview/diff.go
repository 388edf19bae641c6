package reportview

import (
	"cmp"
	"math"
	"slices"

	"pdq/quantize/report"
)

// Change is one tensor present in both runs. Deltas are A − B: a positive ΔSQNR means run A
// reconstructs the tensor better than run B.
type Change struct {
	Output       string       `json:"output"`
	Tensor       string       `json:"tensor"`
	Module       string       `json:"module"`
	Role         string       `json:"role"`
	Layer        int          `json:"layer"`
	Expert       int          `json:"expert"`
	Projection   string       `json:"projection,omitempty"`
	SchemeA      string       `json:"scheme_a"`
	SchemeB      string       `json:"scheme_b"`
	SQNRA        report.Float `json:"sqnr_db_a"`
	SQNRB        report.Float `json:"sqnr_db_b"`
	DeltaSQNR    report.Float `json:"delta_sqnr_db"`
	RelRMSEA     report.Float `json:"rel_rmse_a"`
	RelRMSEB     report.Float `json:"rel_rmse_b"`
	DeltaRelRMSE report.Float `json:"delta_rel_rmse"`
	MaxAbsErrA   report.Float `json:"max_abs_err_a"`
	MaxAbsErrB   report.Float `json:"max_abs_err_b"`
	// The activation-weighted SQNR of calibrated runs, where a side has it (the delta where
	// both have).
	WeightedSQNRA     *report.Float `json:"weighted_sqnr_db_a,omitempty"`
	WeightedSQNRB     *report.Float `json:"weighted_sqnr_db_b,omitempty"`
	DeltaWeightedSQNR *report.Float `json:"delta_weighted_sqnr_db,omitempty"`
	CalibMethodA      string        `json:"calib_method_a,omitempty"`
	CalibMethodB      string        `json:"calib_method_b,omitempty"`
}

// RoleDelta summarizes the changes of one output and role.
type RoleDelta struct {
	Output    string       `json:"output"`
	Role      string       `json:"role"`
	Tensors   int          `json:"tensors"`
	MeanSQNRA report.Float `json:"mean_sqnr_db_a"`
	MeanSQNRB report.Float `json:"mean_sqnr_db_b"`
	MeanDelta report.Float `json:"mean_delta_sqnr_db"`
	MinDelta  report.Float `json:"min_delta_sqnr_db"`
	MaxDelta  report.Float `json:"max_delta_sqnr_db"`
	Better    int          `json:"better"` // tensors with ΔSQNR > 0
	Worse     int          `json:"worse"`  // tensors with ΔSQNR < 0
}

// Diff pairs the rows of a and b by output and module (the tensor names differ between schemes)
// and returns the changes in a's order and the rows only one side has.
func Diff(a, b []report.TensorReport) (changes []Change, onlyA, onlyB []report.TensorReport) {
	type key struct{ output, module string }
	keyOf := func(t *report.TensorReport) key {
		m := t.Module
		if m == "" {
			m = t.Tensor
		}
		return key{t.Output, m}
	}
	inB := make(map[key]int, len(b))
	for i := range b {
		inB[keyOf(&b[i])] = i
	}
	seen := make([]bool, len(b))
	for i := range a {
		ta := &a[i]
		j, ok := inB[keyOf(ta)]
		if !ok || seen[j] {
			onlyA = append(onlyA, *ta)
			continue
		}
		seen[j] = true
		tb := &b[j]
		changes = append(changes, Change{
			Output: ta.Output, Tensor: ta.Tensor, Module: ta.Module, Role: ta.Role, Layer: ta.Layer,
			Expert: ta.Expert, Projection: ta.Projection, SchemeA: ta.Scheme, SchemeB: tb.Scheme,
			SQNRA: ta.SQNR, SQNRB: tb.SQNR, DeltaSQNR: report.Float(delta(float64(ta.SQNR), float64(tb.SQNR))),
			RelRMSEA: ta.RelRMSE, RelRMSEB: tb.RelRMSE, DeltaRelRMSE: report.Float(delta(float64(ta.RelRMSE), float64(tb.RelRMSE))),
			MaxAbsErrA: ta.MaxAbsErr, MaxAbsErrB: tb.MaxAbsErr,
			WeightedSQNRA: ta.WeightedSQNR, WeightedSQNRB: tb.WeightedSQNR, CalibMethodA: ta.CalibMethod, CalibMethodB: tb.CalibMethod,
		})
		if ta.WeightedSQNR != nil && tb.WeightedSQNR != nil {
			d := report.Float(delta(float64(*ta.WeightedSQNR), float64(*tb.WeightedSQNR)))
			changes[len(changes)-1].DeltaWeightedSQNR = &d
		}
	}
	for j := range b {
		if !seen[j] {
			onlyB = append(onlyB, b[j])
		}
	}
	return changes, onlyA, onlyB
}

// delta is x − y with two equal infinities (two exact reconstructions) giving 0.
func delta(x, y float64) float64 {
	if math.IsInf(x, 0) && x == y {
		return 0
	}
	return x - y
}

// SortChanges orders changes by the size of the change in key, largest first (name: by tensor
// name); ties go by output then tensor name.
func SortChanges(cs []Change, key SortKey) {
	slices.SortStableFunc(cs, func(a, b Change) int {
		var c int
		switch key {
		case SortRelRMSE:
			c = cmpFloat(-math.Abs(float64(a.DeltaRelRMSE)), -math.Abs(float64(b.DeltaRelRMSE)))
		case SortMaxAbsErr:
			c = cmpFloat(-math.Abs(delta(float64(a.MaxAbsErrA), float64(a.MaxAbsErrB))),
				-math.Abs(delta(float64(b.MaxAbsErrA), float64(b.MaxAbsErrB))))
		case SortName:
		case SortWeightedSQNR:
			c = cmpFloat(-math.Abs(weightedOf(a.DeltaWeightedSQNR)), -math.Abs(weightedOf(b.DeltaWeightedSQNR)))
		default:
			c = cmpFloat(-math.Abs(float64(a.DeltaSQNR)), -math.Abs(float64(b.DeltaSQNR)))
		}
		if c != 0 {
			return c
		}
		return cmpIdentity(a.Output, a.Tensor, b.Output, b.Tensor)
	})
}

// RoleDeltas groups changes by output (prefill first) and role (in rules.Roles order).
func RoleDeltas(cs []Change) []RoleDelta {
	type key struct{ output, role string }
	type acc struct {
		d                RoleDelta
		sumA, sumB, sumD float64
	}
	accs := map[key]*acc{}
	for _, c := range cs {
		k := key{c.Output, c.Role}
		a := accs[k]
		if a == nil {
			a = &acc{d: RoleDelta{Output: c.Output, Role: c.Role,
				MinDelta: report.Float(math.Inf(1)), MaxDelta: report.Float(math.Inf(-1))}}
			accs[k] = a
		}
		d := float64(c.DeltaSQNR)
		a.d.Tensors++
		a.sumA += float64(c.SQNRA)
		a.sumB += float64(c.SQNRB)
		a.sumD += d
		a.d.MinDelta = report.Float(math.Min(float64(a.d.MinDelta), d))
		a.d.MaxDelta = report.Float(math.Max(float64(a.d.MaxDelta), d))
		switch {
		case d > 0:
			a.d.Better++
		case d < 0:
			a.d.Worse++
		}
	}
	out := make([]RoleDelta, 0, len(accs))
	for _, a := range accs {
		n := float64(a.d.Tensors)
		a.d.MeanSQNRA = report.Float(a.sumA / n)
		a.d.MeanSQNRB = report.Float(a.sumB / n)
		a.d.MeanDelta = report.Float(a.sumD / n)
		out = append(out, a.d)
	}
	slices.SortFunc(out, func(a, b RoleDelta) int {
		if c := cmp.Compare(b.Output, a.Output); c != 0 {
			return c
		}
		if c := cmp.Compare(roleRank(a.Role), roleRank(b.Role)); c != 0 {
			return c
		}
		return cmp.Compare(a.Role, b.Role)
	})
	return out
}
