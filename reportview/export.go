package reportview

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"strconv"

	"pdq/internal/termsafe"
	"pdq/quantize/report"
)

// jsonView is the --json document. Field names follow report.json; floats that are infinite
// (an exact tensor's SQNR) are null.
type jsonView struct {
	Report          string                `json:"report"`
	Tool            string                `json:"tool"`
	Source          string                `json:"source"`
	Options         report.Options        `json:"options"`
	Device          string                `json:"device,omitempty"`
	Query           jsonQuery             `json:"query"`
	TotalTensors    int                   `json:"total_tensors"`
	SelectedTensors int                   `json:"selected_tensors"`
	Summary         []Group               `json:"summary"`
	Tensors         []report.TensorReport `json:"tensors"`
	Thresholds      *jsonThresholds       `json:"thresholds,omitempty"`
	Failures        []Failure             `json:"failures,omitempty"`
	Against         *jsonDiff             `json:"against,omitempty"`
}

type jsonQuery struct {
	Filter string   `json:"filter,omitempty"`
	Roles  []string `json:"roles,omitempty"`
	Output string   `json:"output,omitempty"`
	Sort   SortKey  `json:"sort"`
	Top    int      `json:"top"`
}

type jsonThresholds struct {
	SQNRBelow    *float64 `json:"fail_sqnr_below,omitempty"`
	RelRMSEAbove *float64 `json:"fail_rel_rmse_above,omitempty"`
	Failed       int      `json:"failed"`
}

type jsonDiff struct {
	Report  string         `json:"report"`
	Tool    string         `json:"tool"`
	Source  string         `json:"source"`
	Options report.Options `json:"options"`
	Paired  int            `json:"paired_tensors"`
	OnlyA   []string       `json:"only_a,omitempty"`
	OnlyB   []string       `json:"only_b,omitempty"`
	Roles   []RoleDelta    `json:"roles"`
	Movers  []Change       `json:"movers"`
}

// WriteJSON writes the view as one indented JSON document.
func WriteJSON(w io.Writer, v *View) error {
	q := jsonQuery{Roles: v.Query.Roles, Output: v.Query.Output, Sort: v.Query.Sort, Top: v.Query.Top}
	if v.Query.Filter != nil {
		q.Filter = v.Query.Filter.String()
	}
	j := jsonView{Report: v.Name, Tool: v.Report.Tool, Source: v.Report.Source, Options: v.Report.Options,
		Device: v.Report.Device, Query: q, TotalTensors: len(v.Report.Tensors), SelectedTensors: len(v.Selected),
		Summary: nonNil(v.Summary), Tensors: nonNil(v.Rows), Failures: v.Failures}
	if th := v.Thresholds; th.Active() {
		j.Thresholds = &jsonThresholds{Failed: len(v.Failures)}
		if th.SQNRBelow > math.Inf(-1) {
			j.Thresholds.SQNRBelow = &th.SQNRBelow
		}
		if th.RelRMSEAbove < math.Inf(1) {
			j.Thresholds.RelRMSEAbove = &th.RelRMSEAbove
		}
	}
	if d := v.Diff; d != nil {
		j.Against = &jsonDiff{Report: d.Name, Tool: d.Report.Tool, Source: d.Report.Source, Options: d.Report.Options,
			Paired: len(d.Changes), OnlyA: names(d.OnlyA), OnlyB: names(d.OnlyB), Roles: nonNil(d.Roles), Movers: nonNil(d.Movers)}
	}
	enc := json.NewEncoder(termsafe.JSONWriter(w)) // names come from files: inert on a terminal
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(j)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func names(rows []report.TensorReport) []string {
	var out []string
	for _, t := range rows {
		out = append(out, t.Output+":"+t.Tensor)
	}
	return out
}

// csvColumns are the columns of WriteCSV for one report.
var csvColumns = []string{"output", "tensor", "module", "role", "scheme", "group_size", "method", "layer", "expert",
	"projection", "rows", "cols", "elements", "bytes", "sqnr_db", "rel_rmse", "rmse", "max_abs_err", "mean_abs_err",
	"cosine", "clipped", "rtn_sqnr_db", "calib_method", "weighted_sqnr_db", "weighted_rel_rmse"}

// csvDiffColumns are the columns of WriteCSV for a comparison.
var csvDiffColumns = []string{"output", "tensor", "role", "layer", "expert", "projection", "scheme_a", "scheme_b",
	"sqnr_db_a", "sqnr_db_b", "delta_sqnr_db", "rel_rmse_a", "rel_rmse_b", "delta_rel_rmse", "max_abs_err_a", "max_abs_err_b",
	"weighted_sqnr_db_a", "weighted_sqnr_db_b", "delta_weighted_sqnr_db"}

// WriteCSV writes the top rows (or, for a comparison, the top movers) with a header line. Infinite
// values are written inf; a missing value is empty.
func WriteCSV(w io.Writer, v *View) error {
	cw := csv.NewWriter(w)
	if d := v.Diff; d != nil {
		cw.Write(csvDiffColumns)
		for _, c := range d.Movers {
			cw.Write([]string{c.Output, c.Tensor, c.Role, strconv.Itoa(c.Layer), strconv.Itoa(c.Expert), c.Projection,
				c.SchemeA, c.SchemeB, csvFloat(c.SQNRA), csvFloat(c.SQNRB), csvFloat(c.DeltaSQNR), csvFloat(c.RelRMSEA),
				csvFloat(c.RelRMSEB), csvFloat(c.DeltaRelRMSE), csvFloat(c.MaxAbsErrA), csvFloat(c.MaxAbsErrB),
				csvOpt(c.WeightedSQNRA), csvOpt(c.WeightedSQNRB), csvOpt(c.DeltaWeightedSQNR)})
		}
	} else {
		cw.Write(csvColumns)
		for i := range v.Rows {
			t := &v.Rows[i]
			rows, cols := "", ""
			if len(t.Shape) == 2 {
				rows, cols = strconv.FormatInt(t.Shape[0], 10), strconv.FormatInt(t.Shape[1], 10)
			}
			rtn := ""
			if t.RTNSQNR != nil {
				rtn = csvFloat(*t.RTNSQNR)
			}
			cw.Write([]string{t.Output, t.Tensor, t.Module, t.Role, t.Scheme, strconv.Itoa(t.GroupSize), t.Method,
				strconv.Itoa(t.Layer), strconv.Itoa(t.Expert), t.Projection, rows, cols, strconv.FormatInt(t.Elements, 10),
				strconv.FormatInt(report.StoredBytes(t), 10), csvFloat(t.SQNR), csvFloat(t.RelRMSE), csvFloat(t.RMSE),
				csvFloat(t.MaxAbsErr), csvFloat(t.MeanAbsErr), csvFloat(t.Cosine), strconv.FormatInt(t.Clipped, 10), rtn,
				t.CalibMethod, csvOpt(t.WeightedSQNR), csvOpt(t.WeightedRelRMSE)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvOpt is an optional value: empty when absent.
func csvOpt(f *report.Float) string {
	if f == nil {
		return ""
	}
	return csvFloat(*f)
}

func csvFloat(f report.Float) string {
	v := float64(f)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmtFloat(v, 0)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
