package reportview

import (
	"pdq/quantize/report"
)

// View is what the renderers show of one report: the summary and the top rows of the selection,
// the threshold failures and, when a second report is given, the comparison.
type View struct {
	Name       string         // where the report came from
	Report     *report.Report // the whole report (header fields are shown)
	Query      Query
	Thresholds Thresholds
	Selected   []report.TensorReport // every row that passes the filters, worst first
	Summary    []Group               // of Selected
	Rows       []report.TensorReport // the first Query.Top rows of Selected
	Failures   []Failure             // rows of Selected over the thresholds
	Diff       *DiffView             // nil unless compared with a second report
}

// DiffView compares the view's report (A) with a second one (B) under the same filters.
type DiffView struct {
	Name    string         // where B came from
	Report  *report.Report // B
	Changes []Change       // every paired row, biggest change first
	Movers  []Change       // the first Query.Top changes
	Roles   []RoleDelta
	OnlyA   []report.TensorReport // rows only A has
	OnlyB   []report.TensorReport // rows only B has
}

// NewView selects, sorts and summarizes rep (read from name) under q and checks th.
func NewView(name string, rep *report.Report, q Query, th Thresholds) *View {
	if q.Sort == "" {
		q.Sort = SortSQNR
	}
	v := &View{Name: name, Report: rep, Query: q, Thresholds: th}
	v.Selected = Select(rep, q)
	SortRows(v.Selected, q.Sort)
	v.Summary = Summarize(v.Selected)
	v.Rows = top(v.Selected, q.Top)
	v.Failures = th.Check(v.Selected)
	return v
}

// Compare adds the comparison with report b (read from name), filtered like the view's own.
func (v *View) Compare(name string, b *report.Report) {
	rowsB := Select(b, v.Query)
	changes, onlyA, onlyB := Diff(v.Selected, rowsB)
	SortChanges(changes, v.Query.Sort)
	SortRows(onlyA, SortName)
	SortRows(onlyB, SortName)
	v.Diff = &DiffView{Name: name, Report: b, Changes: changes, Movers: top(changes, v.Query.Top),
		Roles: RoleDeltas(changes), OnlyA: onlyA, OnlyB: onlyB}
}

func top[T any](s []T, n int) []T {
	if n > 0 && len(s) > n {
		return s[:n]
	}
	return s
}
