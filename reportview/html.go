package reportview

import (
	"bytes"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"image/png"
	"io"
	"strconv"
	"strings"

	"pdq/quantize/report"
)

//go:embed page/page.tmpl page/page.css page/errors.js page/sort.js
var pageFiles embed.FS

var pageTemplate = template.Must(template.ParseFS(pageFiles, "page/page.tmpl"))

// maxHTMLFailures bounds the offenders listed on the page.
const maxHTMLFailures = 500

// htmlPage is what page.tmpl shows.
type htmlPage struct {
	Tool, Title         string
	Meta                []string
	Counts              string
	Selected            int
	Thresholds          string
	Failures            *htmlTable
	FailCount, FailMore int
	Summary, Rows       *htmlTable
	RowsTitle           string
	Diff                *htmlDiff
	Figure              template.URL
	FigureW, FigureH    int
	FigureAlt           string
	FigureNote          string
	CSS                 template.CSS
	ErrorsJS, SortJS    template.JS
}

type htmlDiff struct {
	Name, A, Counts, MoversTitle string
	Roles, Movers                *htmlTable
}

type htmlTable struct {
	ID       string
	Sortable bool
	Head     []htmlHead
	Rows     []htmlRow
}

type htmlHead struct {
	Label, Key, Sort string // Sort: "ascending" or "descending" when the rows come sorted by it
	Num              bool
}

type htmlRow struct {
	Name  string
	Cells []htmlCell
}

type htmlCell struct {
	Text, V, Class string // V: the sort value of a numeric cell
}

func textCell(s string) htmlCell { return htmlCell{Text: s} }
func nameCell(s string) htmlCell { return htmlCell{Text: s, Class: "t"} }
func intCell(n int64) htmlCell {
	s := strconv.FormatInt(n, 10)
	return htmlCell{Text: s, V: s, Class: "n"}
}
func numCell(v float64, text string) htmlCell {
	return htmlCell{Text: text, V: csvFloat(report.Float(v)), Class: "n"}
}
func fixedCell(v float64, prec int) htmlCell { return numCell(v, fmtFloat(v, prec)) }
func deltaCell(v float64) htmlCell {
	c := numCell(v, fmtSigned(v, 3))
	switch {
	case v > 0:
		c.Class += " pos"
	case v < 0:
		c.Class += " neg"
	}
	return c
}

// WriteHTML writes one self-contained page (inline CSS and JavaScript, the pictures as a data:
// URI, a content security policy that forbids any network access) with the summary, the
// threshold results, the comparison, a table sortable by clicking its headers, and the pictures.
// Opened with the fragment #selftest, the page clicks its own table headers and writes the
// resulting order and any errors into the element #pdq-selftest.
func WriteHTML(w io.Writer, v *View) error {
	p := &htmlPage{Tool: v.Report.Tool, Title: "pdq report: " + v.Name, Selected: len(v.Selected)}
	p.Meta = append(p.Meta, describeReport(v.Report))
	if v.Report.InputBytes > 0 {
		p.Meta = append(p.Meta, fmt.Sprintf("input %s → prefill %s, decode %s", humanBytes(v.Report.InputBytes),
			humanBytes(v.Report.PrefillBytes), humanBytes(v.Report.DecodeBytes)))
	}
	if c := v.Report.Calibration; c != nil {
		p.Meta = append(p.Meta, describeCalibration(c))
	}
	p.Counts = fmt.Sprintf("%d tensors, %d selected%s.", len(v.Report.Tensors), len(v.Selected), describeQuery(&v.Query))
	if v.Thresholds.Active() {
		p.Thresholds = describeThresholds(v.Thresholds)
	}
	if len(v.Failures) > 0 {
		p.Failures, p.FailCount = failureTable(v.Failures), len(v.Failures)
		if n := len(v.Failures) - maxHTMLFailures; n > 0 {
			p.FailMore = n
			p.Failures.Rows = p.Failures.Rows[:maxHTMLFailures]
		}
	}
	p.Summary = summaryTable(v.Summary)
	p.Rows = rowsTable(v.Rows, v.Query.Sort)
	what := "Worst"
	if v.Query.Sort == SortName {
		what = "First"
	}
	p.RowsTitle = fmt.Sprintf("%s %d of %d tensors by %s", what, len(v.Rows), len(v.Selected), sortWords(v.Query.Sort, false))
	if d := v.Diff; d != nil {
		what := "Biggest movers"
		if v.Query.Sort == SortName {
			what = "First changes"
		}
		p.Diff = &htmlDiff{Name: d.Name, A: v.Name,
			Counts:      fmt.Sprintf("%d tensors in both, %d only in A, %d only in B.", len(d.Changes), len(d.OnlyA), len(d.OnlyB)),
			MoversTitle: fmt.Sprintf("%s: %d of %d by %s", what, len(d.Movers), len(d.Changes), sortWords(v.Query.Sort, true)),
			Roles:       roleDeltaTable(d.Roles), Movers: moversTable(d.Movers, v.Query.Sort)}
	}
	if err := p.addFigure(v); err != nil {
		return err
	}
	css, _ := pageFiles.ReadFile("page/page.css")
	ejs, _ := pageFiles.ReadFile("page/errors.js")
	sjs, _ := pageFiles.ReadFile("page/sort.js")
	p.CSS, p.ErrorsJS, p.SortJS = template.CSS(css), template.JS(ejs), template.JS(sjs)
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return fmt.Errorf("reportview: html: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func (p *htmlPage) addFigure(v *View) error {
	var img bytes.Buffer
	err := WritePlot(&img, v, FormatPNG)
	if errors.Is(err, ErrNothingToPlot) {
		p.FigureNote = "No pictures: the selection has no routed experts and no finite SQNR."
		return nil
	}
	if err != nil {
		return err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img.Bytes()))
	if err != nil {
		return fmt.Errorf("reportview: html: figure: %w", err)
	}
	p.FigureW, p.FigureH = cfg.Width, cfg.Height
	p.Figure = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(img.Bytes()))
	if v.Diff != nil {
		p.FigureAlt = "ΔSQNR (A − B) of the routed experts by layer (rows) and expert (columns), one panel per projection; histograms of per-tensor ΔSQNR."
	} else {
		p.FigureAlt = "SQNR of the routed experts by layer (rows) and expert (columns), one panel per projection; histograms of per-tensor SQNR."
		for _, t := range v.Selected {
			if t.WeightedSQNR != nil {
				p.FigureAlt = strings.TrimSuffix(p.FigureAlt, ".") + " and of the activation-weighted SQNR of the calibrated tensors."
				break
			}
		}
	}
	return nil
}

func summaryTable(gs []Group) *htmlTable {
	t := &htmlTable{ID: "summary-table", Head: []htmlHead{{Label: "output"}, {Label: "role"}, {Label: "scheme"},
		{Label: "tensors", Num: true}, {Label: "elements", Num: true}, {Label: "bytes", Num: true}, {Label: "bits/w", Num: true},
		{Label: "mean SQNR dB", Num: true}, {Label: "min SQNR dB", Num: true}, {Label: "worst rel RMSE", Num: true},
		{Label: "mean rtn dB", Num: true}}}
	for _, g := range gs {
		rtn := textCell("–")
		rtn.Class = "n"
		if g.MeanRTNSQNR != nil {
			rtn = fixedCell(float64(*g.MeanRTNSQNR), 2)
		}
		t.Rows = append(t.Rows, htmlRow{Cells: []htmlCell{textCell(g.Output), textCell(g.Role), textCell(g.Scheme),
			intCell(int64(g.Tensors)), intCell(g.Elements), numCell(float64(g.Bytes), humanBytes(g.Bytes)),
			fixedCell(g.BitsPerWeight(), 2), fixedCell(float64(g.MeanSQNR), 2), fixedCell(float64(g.MinSQNR), 2),
			fixedCell(float64(g.WorstRelRMSE), 4), rtn}})
	}
	return t
}

// sortState marks the column the rows arrive sorted by.
func sortState(key, col SortKey) string {
	if key != col {
		return ""
	}
	if key == SortSQNR || key == SortName {
		return "ascending"
	}
	return "descending"
}

func rowsTable(rows []report.TensorReport, key SortKey) *htmlTable {
	t := &htmlTable{ID: "worst-table", Sortable: true, Head: []htmlHead{{Label: "output", Key: "output"},
		{Label: "tensor", Key: "name", Sort: sortState(key, SortName)}, {Label: "role", Key: "role"},
		{Label: "scheme", Key: "scheme"}, {Label: "layer", Key: "layer", Num: true}, {Label: "expert", Key: "expert", Num: true},
		{Label: "SQNR dB", Key: "sqnr", Num: true, Sort: sortState(key, SortSQNR)},
		{Label: "rel RMSE", Key: "rel_rmse", Num: true, Sort: sortState(key, SortRelRMSE)},
		{Label: "max abs err", Key: "max_abs_err", Num: true, Sort: sortState(key, SortMaxAbsErr)},
		{Label: "rtn dB", Key: "rtn", Num: true}}}
	// Calibrated runs add what the search optimised and how: the activation-weighted SQNR, the
	// method and the statistics entry when it was the gate/up sibling's.
	calibrated := false
	for _, r := range rows {
		calibrated = calibrated || r.CalibMethod != "" || r.WeightedSQNR != nil
	}
	if calibrated {
		t.Head = append(t.Head, htmlHead{Label: "weighted dB", Key: "weighted", Num: true},
			htmlHead{Label: "calib", Key: "calib_method"}, htmlHead{Label: "calib entry", Key: "calib_entry"})
	}
	for _, r := range rows {
		rtn := htmlCell{Text: "–", V: "-inf", Class: "n"}
		if r.RTNSQNR != nil {
			rtn = fixedCell(float64(*r.RTNSQNR), 2)
		}
		cells := []htmlCell{textCell(r.Output),
			nameCell(r.Tensor), textCell(r.Role), textCell(r.Scheme), indexCell(r.Layer), indexCell(r.Expert),
			fixedCell(float64(r.SQNR), 2), fixedCell(float64(r.RelRMSE), 4), numCell(float64(r.MaxAbsErr), fmtSci(float64(r.MaxAbsErr))),
			rtn}
		if calibrated {
			ws := htmlCell{Text: "–", V: "-inf", Class: "n"}
			if r.WeightedSQNR != nil {
				ws = fixedCell(float64(*r.WeightedSQNR), 2)
			}
			method := r.CalibMethod
			if r.CalibNote != "" {
				method += " (" + r.CalibNote + ")"
			}
			cells = append(cells, ws, textCell(method), nameCell(r.CalibEntry))
		}
		t.Rows = append(t.Rows, htmlRow{Name: r.Output + ":" + r.Tensor, Cells: cells})
	}
	return t
}

// indexCell shows a layer or expert index, blank for -1 (not in a layer, not an expert).
func indexCell(i int) htmlCell {
	if i < 0 {
		return htmlCell{V: "-1", Class: "n"}
	}
	return intCell(int64(i))
}

func failureTable(fs []Failure) *htmlTable {
	t := &htmlTable{ID: "failures-table", Head: []htmlHead{{Label: "output"}, {Label: "tensor"}, {Label: "why"}}}
	for _, f := range fs {
		t.Rows = append(t.Rows, htmlRow{Name: f.Output + ":" + f.Tensor, Cells: []htmlCell{textCell(f.Output),
			nameCell(f.Tensor), textCell(strings.Join(f.Reasons, "; "))}})
	}
	return t
}

func roleDeltaTable(rs []RoleDelta) *htmlTable {
	t := &htmlTable{ID: "roles-table", Head: []htmlHead{{Label: "output"}, {Label: "role"}, {Label: "tensors", Num: true},
		{Label: "mean A dB", Num: true}, {Label: "mean B dB", Num: true}, {Label: "mean Δ dB", Num: true},
		{Label: "min Δ dB", Num: true}, {Label: "max Δ dB", Num: true}, {Label: "better", Num: true}, {Label: "worse", Num: true}}}
	for _, r := range rs {
		t.Rows = append(t.Rows, htmlRow{Cells: []htmlCell{textCell(r.Output), textCell(r.Role), intCell(int64(r.Tensors)),
			fixedCell(float64(r.MeanSQNRA), 2), fixedCell(float64(r.MeanSQNRB), 2), deltaCell(float64(r.MeanDelta)),
			deltaCell(float64(r.MinDelta)), deltaCell(float64(r.MaxDelta)), intCell(int64(r.Better)), intCell(int64(r.Worse))}})
	}
	return t
}

func moversTable(cs []Change, key SortKey) *htmlTable {
	t := &htmlTable{ID: "movers-table", Sortable: true, Head: []htmlHead{{Label: "output", Key: "output"},
		{Label: "tensor", Key: "name", Sort: sortState(key, SortName)}, {Label: "scheme", Key: "scheme"},
		{Label: "A dB", Key: "sqnr_a", Num: true}, {Label: "B dB", Key: "sqnr_b", Num: true},
		{Label: "Δ dB", Key: "sqnr", Num: true}, {Label: "rel RMSE A", Key: "rel_rmse_a", Num: true},
		{Label: "rel RMSE B", Key: "rel_rmse_b", Num: true}}}
	for _, c := range cs {
		t.Rows = append(t.Rows, htmlRow{Name: c.Output + ":" + c.Tensor, Cells: []htmlCell{textCell(c.Output),
			nameCell(c.Tensor), textCell(schemePair(c.SchemeA, c.SchemeB)), fixedCell(float64(c.SQNRA), 2),
			fixedCell(float64(c.SQNRB), 2), deltaCell(float64(c.DeltaSQNR)), fixedCell(float64(c.RelRMSEA), 4),
			fixedCell(float64(c.RelRMSEB), 4)}})
	}
	return t
}
