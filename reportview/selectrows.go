package reportview

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"pdq/quantize/report"
)

// SortKey orders tensors, worst first.
type SortKey string

// The sort orders: SQNR ascending, relative RMSE and max error descending, name ascending. In a
// comparison of two runs they order by the size of the change instead.
const (
	SortSQNR      SortKey = "sqnr"
	SortRelRMSE   SortKey = "rel_rmse"
	SortMaxAbsErr SortKey = "max_abs_err"
	SortName      SortKey = "name"
	// SortWeightedSQNR orders a calibrated run by its activation-weighted SQNR, lowest first;
	// rows without one (not INT4, or no statistics) come last.
	SortWeightedSQNR SortKey = "weighted_sqnr"
)

// SortKeys lists the accepted sort orders.
var SortKeys = []SortKey{SortSQNR, SortRelRMSE, SortMaxAbsErr, SortName, SortWeightedSQNR}

// weightedOf is a row's weighted SQNR, NaN (sorted last) when it has none.
func weightedOf(f *report.Float) float64 {
	if f == nil {
		return math.NaN()
	}
	return float64(*f)
}

// ParseSortKey checks a sort order given by name.
func ParseSortKey(s string) (SortKey, error) {
	for _, k := range SortKeys {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(SortKeys))
	for i, k := range SortKeys {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown sort order %q (want %s)", s, strings.Join(names, ", "))
}

// Query picks and orders report rows. The zero value selects every row, sorted by SQNR.
type Query struct {
	Filter *regexp.Regexp // tensor name must match; nil for any
	Roles  []string       // role must be one of these; empty for any
	Output string         // "prefill" or "decode"; empty for both
	Sort   SortKey        // empty means SortSQNR
	Top    int            // rows to show after sorting; 0 for all
}

// Match reports whether row t passes the query's filters.
func (q *Query) Match(t *report.TensorReport) bool {
	if q.Output != "" && t.Output != q.Output {
		return false
	}
	if len(q.Roles) > 0 && !slices.Contains(q.Roles, t.Role) {
		return false
	}
	return q.Filter == nil || q.Filter.MatchString(t.Tensor)
}

// Select returns the rows of rep that pass the filters, in report order.
func Select(rep *report.Report, q Query) []report.TensorReport {
	n := 0
	for i := range rep.Tensors {
		if q.Match(&rep.Tensors[i]) {
			n++
		}
	}
	out := make([]report.TensorReport, 0, n)
	for i := range rep.Tensors {
		if q.Match(&rep.Tensors[i]) {
			out = append(out, rep.Tensors[i])
		}
	}
	return out
}

// SortRows orders rows worst first by key; ties go by output (prefill first) then tensor name, so
// the order does not depend on the input order.
func SortRows(rows []report.TensorReport, key SortKey) {
	slices.SortFunc(rows, func(a, b report.TensorReport) int {
		var c int
		switch key {
		case SortRelRMSE:
			c = cmpFloat(float64(b.RelRMSE), float64(a.RelRMSE))
		case SortMaxAbsErr:
			c = cmpFloat(float64(b.MaxAbsErr), float64(a.MaxAbsErr))
		case SortName:
		case SortWeightedSQNR:
			c = cmpFloat(weightedOf(a.WeightedSQNR), weightedOf(b.WeightedSQNR))
		default:
			c = cmpFloat(float64(a.SQNR), float64(b.SQNR))
		}
		if c != 0 {
			return c
		}
		return cmpIdentity(a.Output, a.Tensor, b.Output, b.Tensor)
	})
}

// cmpIdentity orders by output (prefill before decode) then tensor name.
func cmpIdentity(ao, at, bo, bt string) int {
	if c := cmp.Compare(bo, ao); c != 0 { // "prefill" > "decode"
		return c
	}
	return cmp.Compare(at, bt)
}

// cmpFloat is cmp.Compare with NaN last instead of first.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

// Thresholds are the CI limits; a NaN or infinite limit that cannot be crossed is off.
type Thresholds struct {
	SQNRBelow    float64 // fail a tensor whose SQNR (dB) is below this; -Inf for off
	RelRMSEAbove float64 // fail a tensor whose relative RMSE is above this; +Inf for off
}

// NoThresholds is the Thresholds value that fails nothing.
var NoThresholds = Thresholds{SQNRBelow: math.Inf(-1), RelRMSEAbove: math.Inf(1)}

// Active reports whether any limit is set.
func (th Thresholds) Active() bool {
	return th.SQNRBelow > math.Inf(-1) || th.RelRMSEAbove < math.Inf(1)
}

// Failure is a tensor over a threshold and why.
type Failure struct {
	report.TensorReport
	Reasons []string `json:"reasons"`
}

// Check returns the rows over the thresholds, worst SQNR first.
func (th Thresholds) Check(rows []report.TensorReport) []Failure {
	var out []Failure
	for _, t := range rows {
		var why []string
		if s := float64(t.SQNR); s < th.SQNRBelow || math.IsNaN(s) && th.SQNRBelow > math.Inf(-1) {
			why = append(why, fmt.Sprintf("SQNR %s dB < %s", fmtApart(s, th.SQNRBelow, 2), fmtFloat(th.SQNRBelow, -1)))
		}
		if r := float64(t.RelRMSE); r > th.RelRMSEAbove || math.IsNaN(r) && th.RelRMSEAbove < math.Inf(1) {
			why = append(why, fmt.Sprintf("rel RMSE %s > %s", fmtApart(r, th.RelRMSEAbove, 4), fmtFloat(th.RelRMSEAbove, -1)))
		}
		if why != nil {
			out = append(out, Failure{TensorReport: t, Reasons: why})
		}
	}
	slices.SortStableFunc(out, func(a, b Failure) int {
		if c := cmpFloat(float64(a.SQNR), float64(b.SQNR)); c != 0 {
			return c
		}
		return cmpIdentity(a.Output, a.Tensor, b.Output, b.Tensor)
	})
	return out
}

// fmtApart prints v with at least prec decimals and as many more as it takes to tell it from the
// limit it is compared with, so that "18.12 < 18.12" reads "18.1195 < 18.12".
func fmtApart(v, limit float64, prec int) string {
	s := fmtFloat(v, prec)
	for p := prec + 1; p <= 17 && s == fmtFloat(limit, p-1); p++ {
		s = fmtFloat(v, p)
	}
	return s
}
