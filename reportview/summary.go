package reportview

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"pdq/quantize/report"
	"pdq/quantize/rules"
)

// Group summarizes the rows of one output, role and scheme.
type Group struct {
	Output       string        `json:"output"`
	Role         string        `json:"role"`
	Scheme       string        `json:"scheme"`
	Tensors      int           `json:"tensors"`
	Elements     int64         `json:"elements"`
	Bytes        int64         `json:"bytes"` // report.StoredBytes summed over the group
	MeanSQNR     report.Float  `json:"mean_sqnr_db"`
	MinSQNR      report.Float  `json:"min_sqnr_db"`
	WorstRelRMSE report.Float  `json:"worst_rel_rmse"`
	MeanRTNSQNR  *report.Float `json:"mean_rtn_sqnr_db,omitempty"` // when every row has one
}

// BitsPerWeight is the stored size per element, scales included.
func (g Group) BitsPerWeight() float64 {
	if g.Elements == 0 {
		return 0
	}
	return float64(g.Bytes) * 8 / float64(g.Elements)
}

// Summarize groups rows by output (prefill first), role (in rules.Roles order) and scheme. The mean
// SQNR is the mean of the per-tensor dB values; it is +Inf when any tensor is exact.
func Summarize(rows []report.TensorReport) []Group {
	type key struct{ output, role, scheme string }
	type acc struct {
		g           Group
		sum, rtnSum float64
		rtnN        int
	}
	accs := map[key]*acc{}
	for _, t := range rows {
		k := key{t.Output, t.Role, t.Scheme}
		a := accs[k]
		if a == nil {
			a = &acc{g: Group{Output: t.Output, Role: t.Role, Scheme: t.Scheme,
				MinSQNR: report.Float(math.Inf(1)), WorstRelRMSE: report.Float(math.Inf(-1))}}
			accs[k] = a
		}
		a.g.Tensors++
		a.g.Elements += t.Elements
		a.g.Bytes += report.StoredBytes(&t)
		a.sum += float64(t.SQNR)
		a.g.MinSQNR = report.Float(math.Min(float64(a.g.MinSQNR), float64(t.SQNR)))
		a.g.WorstRelRMSE = report.Float(math.Max(float64(a.g.WorstRelRMSE), float64(t.RelRMSE)))
		if t.RTNSQNR != nil {
			a.rtnN++
			a.rtnSum += float64(*t.RTNSQNR)
		}
	}
	out := make([]Group, 0, len(accs))
	for _, a := range accs {
		a.g.MeanSQNR = report.Float(a.sum / float64(a.g.Tensors))
		if a.rtnN == a.g.Tensors {
			v := report.Float(a.rtnSum / float64(a.rtnN))
			a.g.MeanRTNSQNR = &v
		}
		out = append(out, a.g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		if c := cmp.Compare(b.Output, a.Output); c != 0 {
			return c
		}
		if c := cmp.Compare(roleRank(a.Role), roleRank(b.Role)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Role, b.Role); c != 0 {
			return c
		}
		return cmp.Compare(a.Scheme, b.Scheme)
	})
	return out
}

// roleRank places known roles in report order and unknown ones after them.
func roleRank(role string) int {
	for i, r := range rules.Roles {
		if string(r) == role {
			return i
		}
	}
	return len(rules.Roles)
}

// fmtFloat prints v with prec decimals (prec < 0: shortest form); infinities as inf and -inf.
func fmtFloat(v float64, prec int) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
