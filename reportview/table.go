package reportview

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"pdq/internal/termsafe"
	"pdq/quantize/report"
)

// WriteTable prints the view for people: a header, the summary, the top rows (or, for a
// comparison, the per-role mean changes and the biggest movers) and the threshold failures.
func WriteTable(w io.Writer, v *View) error {
	ew := &errWriter{w: termsafe.Writer(w)} // names and the calibration source come from files
	writeHeader(ew, "", v.Name, v.Report)
	if v.Diff != nil {
		writeHeader(ew, "against ", v.Diff.Name, v.Diff.Report)
	}
	fmt.Fprintf(ew, "%d tensors, %d selected%s\n", len(v.Report.Tensors), len(v.Selected), describeQuery(&v.Query))
	if v.Diff != nil {
		writeDiffTables(ew, v)
	} else {
		writeSummary(ew, v.Summary)
		writeRows(ew, v)
	}
	writeFailures(ew, v)
	return ew.err
}

func writeHeader(w io.Writer, prefix, name string, rep *report.Report) {
	// One line each: the fields come from the file, so newlines in them are escaped too.
	name = termsafe.Line(name)
	fmt.Fprintf(w, "%s%s: %s\n", prefix, name, termsafe.Line(describeReport(rep)))
	if rep.Calibration != nil {
		fmt.Fprintf(w, "%s%s: %s\n", prefix, name, termsafe.Line(describeCalibration(rep.Calibration)))
	}
}

// describeReport is one line naming how a report was made.
func describeReport(rep *report.Report) string {
	o := rep.Options
	parts := []string{rep.Tool, "source " + rep.Source + " (" + rep.SourceLayout.String() + ")"}
	if o.Method != "" || o.GroupSize != 0 {
		g := "per-channel"
		if o.GroupSize > 0 {
			g = fmt.Sprintf("g%d", o.GroupSize)
		}
		format := "int4"
		if o.DecodeFormat != "" {
			format = o.DecodeFormat
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", format, g, o.Method))
	}
	if rep.Device != "" {
		parts = append(parts, "device "+rep.Device)
	}
	return strings.Join(parts, ", ")
}

// describeCalibration is a calibrated run's statistics and methods in one line.
func describeCalibration(c *report.Calibration) string {
	parts := []string{fmt.Sprintf("calibration %s from %s (%d tokens", c.Method, c.File, c.Tokens)}
	if c.Source != "" {
		parts[0] += ", " + c.Source
	}
	parts[0] += ")"
	if c.WeightedSQNR != nil {
		parts = append(parts, "weighted SQNR "+fmtFloat(float64(*c.WeightedSQNR), 2)+" dB")
	}
	methods := make([]string, 0, len(c.Modules))
	for m := range c.Modules {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	for _, m := range methods {
		parts = append(parts, fmt.Sprintf("%s %d", m, c.Modules[m]))
	}
	if c.NoTokens > 0 || c.NoStats > 0 {
		parts = append(parts, fmt.Sprintf("%d saw no tokens, %d without statistics", c.NoTokens, c.NoStats))
	}
	return strings.Join(parts, ", ")
}

// describeQuery is the filters in words, with a leading separator, or "".
func describeQuery(q *Query) string {
	var p []string
	if q.Output != "" {
		p = append(p, "output "+q.Output)
	}
	if len(q.Roles) > 0 {
		p = append(p, "role "+strings.Join(q.Roles, ","))
	}
	if q.Filter != nil {
		p = append(p, "filter "+q.Filter.String())
	}
	if len(p) == 0 {
		return ""
	}
	return " (" + strings.Join(p, "; ") + ")"
}

func writeSummary(w io.Writer, gs []Group) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintln(w)
	g := newGrid("output", "role", "scheme", "tensors", "elements", "bytes", "bits/w", "mean SQNR dB", "min SQNR dB",
		"worst rel RMSE", "mean rtn dB").alignRight(3, 4, 5, 6, 7, 8, 9, 10)
	for _, s := range gs {
		rtn := "-"
		if s.MeanRTNSQNR != nil {
			rtn = fmtFloat(float64(*s.MeanRTNSQNR), 2)
		}
		g.add(s.Output, s.Role, s.Scheme, strconv.Itoa(s.Tensors), strconv.FormatInt(s.Elements, 10), humanBytes(s.Bytes),
			fmt.Sprintf("%.2f", s.BitsPerWeight()), fmtFloat(float64(s.MeanSQNR), 2), fmtFloat(float64(s.MinSQNR), 2),
			fmtFloat(float64(s.WorstRelRMSE), 4), rtn)
	}
	g.write(w, "")
}

// sortWords names a sort order in a sentence.
func sortWords(k SortKey, diff bool) string {
	if diff {
		switch k {
		case SortRelRMSE:
			return "|Δ rel RMSE|"
		case SortMaxAbsErr:
			return "|Δ max abs err|"
		case SortName:
			return "name"
		case SortWeightedSQNR:
			return "|Δ weighted SQNR|"
		}
		return "|ΔSQNR|"
	}
	switch k {
	case SortRelRMSE:
		return "relative RMSE"
	case SortMaxAbsErr:
		return "max abs error"
	case SortName:
		return "name"
	case SortWeightedSQNR:
		return "activation-weighted SQNR"
	}
	return "SQNR"
}

func writeRows(w io.Writer, v *View) {
	if len(v.Rows) == 0 {
		return
	}
	what := "worst"
	if v.Query.Sort == SortName {
		what = "first"
	}
	fmt.Fprintf(w, "\n%s %d of %d by %s:\n", what, len(v.Rows), len(v.Selected), sortWords(v.Query.Sort, false))
	// Calibrated runs also show the activation-weighted SQNR that the search optimised.
	weighted := false
	for _, t := range v.Rows {
		weighted = weighted || t.WeightedSQNR != nil
	}
	head := []string{"output", "tensor", "role", "scheme", "SQNR dB", "rel RMSE", "max abs err", "rtn dB"}
	right := []int{4, 5, 6, 7}
	if weighted {
		head, right = append(head, "weighted dB", "calib"), append(right, 8)
	}
	g := newGrid(head...).alignRight(right...)
	for _, t := range v.Rows {
		rtn := "-"
		if t.RTNSQNR != nil {
			rtn = fmtFloat(float64(*t.RTNSQNR), 2)
		}
		cells := []string{t.Output, t.Tensor, t.Role, t.Scheme, fmtFloat(float64(t.SQNR), 2), fmtFloat(float64(t.RelRMSE), 4),
			fmtSci(float64(t.MaxAbsErr)), rtn}
		if weighted {
			ws := "-"
			if t.WeightedSQNR != nil {
				ws = fmtFloat(float64(*t.WeightedSQNR), 2)
			}
			cells = append(cells, ws, t.CalibMethod)
		}
		g.add(cells...)
	}
	g.write(w, "")
}

func writeDiffTables(w io.Writer, v *View) {
	d := v.Diff
	fmt.Fprintf(w, "ΔSQNR = A − B (A: %s, B: %s); positive means A is closer to the source\n", v.Name, d.Name)
	fmt.Fprintf(w, "%d tensors in both, %d only in A, %d only in B\n", len(d.Changes), len(d.OnlyA), len(d.OnlyB))
	if len(d.Roles) > 0 {
		fmt.Fprintln(w)
		g := newGrid("output", "role", "tensors", "mean A dB", "mean B dB", "mean Δ dB", "min Δ dB", "max Δ dB",
			"better", "worse").alignRight(2, 3, 4, 5, 6, 7, 8, 9)
		for _, r := range d.Roles {
			g.add(r.Output, r.Role, strconv.Itoa(r.Tensors), fmtFloat(float64(r.MeanSQNRA), 2), fmtFloat(float64(r.MeanSQNRB), 2),
				fmtSigned(float64(r.MeanDelta), 3), fmtSigned(float64(r.MinDelta), 3), fmtSigned(float64(r.MaxDelta), 3),
				strconv.Itoa(r.Better), strconv.Itoa(r.Worse))
		}
		g.write(w, "")
	}
	if len(d.Movers) > 0 {
		what := "biggest movers"
		if v.Query.Sort == SortName {
			what = "first"
		}
		fmt.Fprintf(w, "\n%s, %d of %d by %s:\n", what, len(d.Movers), len(d.Changes), sortWords(v.Query.Sort, true))
		// Calibrated runs also show the change in the activation-weighted SQNR.
		weighted := false
		for _, c := range d.Movers {
			weighted = weighted || c.WeightedSQNRA != nil || c.WeightedSQNRB != nil
		}
		head := []string{"output", "tensor", "scheme", "A dB", "B dB", "Δ dB", "rel RMSE A", "rel RMSE B"}
		right := []int{3, 4, 5, 6, 7}
		if weighted {
			head, right = append(head, "weighted A", "weighted B", "Δ weighted"), append(right, 8, 9, 10)
		}
		g := newGrid(head...).alignRight(right...)
		opt := func(f *report.Float, signed bool) string {
			switch {
			case f == nil:
				return "-"
			case signed:
				return fmtSigned(float64(*f), 3)
			}
			return fmtFloat(float64(*f), 2)
		}
		for _, c := range d.Movers {
			cells := []string{c.Output, c.Tensor, schemePair(c.SchemeA, c.SchemeB), fmtFloat(float64(c.SQNRA), 2), fmtFloat(float64(c.SQNRB), 2),
				fmtSigned(float64(c.DeltaSQNR), 3), fmtFloat(float64(c.RelRMSEA), 4), fmtFloat(float64(c.RelRMSEB), 4)}
			if weighted {
				cells = append(cells, opt(c.WeightedSQNRA, false), opt(c.WeightedSQNRB, false), opt(c.DeltaWeightedSQNR, true))
			}
			g.add(cells...)
		}
		g.write(w, "")
	}
	for _, s := range []struct {
		side string
		rows []report.TensorReport
	}{{"A", d.OnlyA}, {"B", d.OnlyB}} {
		for i, t := range s.rows {
			if i == 10 {
				fmt.Fprintf(w, "  ... and %d more only in %s\n", len(s.rows)-10, s.side)
				break
			}
			if i == 0 {
				fmt.Fprintf(w, "\nonly in %s:\n", s.side)
			}
			fmt.Fprintf(w, "  %s  %s  %s\n", termsafe.Line(t.Output), termsafe.Line(t.Tensor), termsafe.Line(t.Scheme))
		}
	}
}

func schemePair(a, b string) string {
	if a == b {
		return a
	}
	return a + "/" + b
}

func writeFailures(w io.Writer, v *View) {
	if !v.Thresholds.Active() {
		return
	}
	if len(v.Failures) == 0 {
		fmt.Fprintf(w, "\nthresholds (%s): all %d selected tensors pass\n", describeThresholds(v.Thresholds), len(v.Selected))
		return
	}
	fmt.Fprintf(w, "\nFAIL: %d of %d selected tensors over the thresholds (%s):\n", len(v.Failures), len(v.Selected), describeThresholds(v.Thresholds))
	g := newGrid("output", "tensor", "why")
	for _, f := range v.Failures {
		g.add(f.Output, f.Tensor, strings.Join(f.Reasons, "; "))
	}
	g.write(w, "  ")
}

// describeThresholds names the active limits.
func describeThresholds(th Thresholds) string {
	var p []string
	if th.SQNRBelow > math.Inf(-1) {
		p = append(p, "SQNR < "+fmtFloat(th.SQNRBelow, -1)+" dB")
	}
	if th.RelRMSEAbove < math.Inf(1) {
		p = append(p, "rel RMSE > "+fmtFloat(th.RelRMSEAbove, -1))
	}
	return strings.Join(p, ", ")
}

// fmtSigned prints v with a sign and prec decimals.
func fmtSigned(v float64, prec int) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmtFloat(v, prec)
	}
	return fmt.Sprintf("%+.*f", prec, v)
}

// fmtSci prints an absolute error compactly: four significant digits.
func fmtSci(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmtFloat(v, 0)
	}
	return fmt.Sprintf("%.4g", v)
}

// humanBytes prints a byte count with a binary unit: "1.50 GiB".
func humanBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/(1<<10), 0
	for v >= 1<<10 && u < len(units)-1 {
		v /= 1 << 10
		u++
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}

// errWriter keeps the first write error so that rendering code can print freely.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
