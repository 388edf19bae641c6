package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"pdq/internal/fsutil"
	"pdq/quantize/report"
)

// maxReportBytes bounds the report.json verify reads (a 1.5·10¹² parameter model's is about 60 MB).
const maxReportBytes = 1 << 30

// compareReport checks a report.json written by convert against the rows verify recomputed for
// the output v checks: every field a gate or a selection of pdq report reads (the error metrics,
// role, scheme, layer, expert, projection, group size, shape, source dtype) must agree, every
// tensor must have exactly one row, and no row may name a tensor the output does not hold.
// The calibration fields (weighted metrics, calib_*), the method and the clipped count are not
// checked: they need the statistics file or the quantizer's internals, which verify has not.
func compareReport(v *VerifyResult, path string, groupSize int) {
	b, err := fsutil.ReadRegularFile(path, maxReportBytes) // a FIFO is refused, not waited on
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		v.problem("%s: %v", path, err)
		return
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		v.problem("%s: %v", path, err)
		return
	}
	v.ReportChecked = true
	written := map[string]report.TensorReport{}
	for _, t := range rep.Tensors {
		switch {
		case t.Output != "prefill" && t.Output != "decode":
			v.problem("report.json has a row for %q of output %q, which no conversion writes", t.Tensor, t.Output)
		case t.Output != v.Output:
		case hasKey(written, t.Tensor):
			v.problem("report.json has more than one row for %q", t.Tensor)
		default:
			written[t.Tensor] = t
		}
	}
	for _, t := range v.Report.Tensors {
		w, ok := written[t.Tensor]
		if !ok {
			v.problem("report.json has no row for %q", t.Tensor)
			continue
		}
		delete(written, t.Tensor)
		want := t
		if f := report.Info(Scheme(t.Scheme)).Family; f == report.FamilyInt4 || f == report.FamilyFP4 { // the decode formats' rows name their group
			want.GroupSize = groupSize
		}
		for _, d := range rowDiffs(want, w) {
			v.problem("%q: %s", t.Tensor, d)
		}
	}
	extra := make([]string, 0, len(written))
	for n := range written {
		extra = append(extra, n)
	}
	slices.Sort(extra)
	for _, n := range extra {
		v.problem("report.json has a row for %q, which the %s output does not hold as a measured tensor", n, v.Output)
	}
}

func hasKey(m map[string]report.TensorReport, k string) bool {
	_, ok := m[k]
	return ok
}

// rowDiffs lists the fields in which the written row w differs from the recomputed row r.
func rowDiffs(r, w report.TensorReport) []string {
	var d []string
	str := func(name, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %q recomputed, report.json says %q", name, a, b))
		}
	}
	num := func(name string, a, b int64) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %d recomputed, report.json says %d", name, a, b))
		}
	}
	flt := func(name string, a, b report.Float) {
		if !sameMetric(float64(a), float64(b)) {
			d = append(d, fmt.Sprintf("%s %.9g recomputed, report.json says %.9g", name, float64(a), float64(b)))
		}
	}
	str("module", r.Module, w.Module)
	str("role", r.Role, w.Role)
	str("scheme", r.Scheme, w.Scheme)
	str("projection", r.Projection, w.Projection)
	str("source_dtype", r.SourceDType, w.SourceDType)
	num("layer", int64(r.Layer), int64(w.Layer))
	num("expert", int64(r.Expert), int64(w.Expert))
	num("group_size", int64(r.GroupSize), int64(w.GroupSize))
	num("elements", r.Elements, w.Elements)
	if !slices.Equal(r.Shape, w.Shape) {
		d = append(d, fmt.Sprintf("shape %v recomputed, report.json says %v", r.Shape, w.Shape))
	}
	flt("sqnr_db", r.SQNR, w.SQNR)
	flt("rel_rmse", r.RelRMSE, w.RelRMSE)
	flt("rmse", r.RMSE, w.RMSE)
	flt("max_abs_err", r.MaxAbsErr, w.MaxAbsErr)
	flt("mean_abs_err", r.MeanAbsErr, w.MeanAbsErr)
	flt("cosine", r.Cosine, w.Cosine)
	return d
}

// sameMetric compares a recomputed metric a with the written b: a non-finite a is written as
// null (read back as +Inf); finite values agree to the last few bits (the run sums in slabs).
func sameMetric(a, b float64) bool {
	if math.IsNaN(a) || math.IsInf(a, 0) {
		return math.IsInf(b, 1)
	}
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
