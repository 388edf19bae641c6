package compare

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"pdq/internal/units"
	"pdq/quantize/report"
	"pdq/reportview"
)

// Report is the document of a comparison: what was measured and one Summary per format.
type Report struct {
	Source string `json:"source"`
	Method string `json:"method"`
	// Targets counts the decode checkpoint's target modules, Measured those measured (a sample
	// with layers or experts chosen), MeasuredBytes their weight bytes in the source.
	Targets       int   `json:"target_modules"`
	Measured      int   `json:"measured_modules"`
	MeasuredBytes int64 `json:"measured_source_bytes"`
	// Serving describes the decode server of the serving columns ("" without one).
	Serving string    `json:"serving,omitempty"`
	Formats []Summary `json:"formats"`
}

// NewReport gathers a result's summaries (with their sizes) into a report.
func NewReport(source string, r *Result, sums []Summary) *Report {
	return &Report{Source: source, Method: string(r.Method), Targets: r.Targets, Measured: len(r.Modules),
		MeasuredBytes: r.SourceBytes, Formats: sums}
}

// db formats an SQNR for a table: two decimals, "exact" for an error-free encoding.
func db(v float64) string {
	if math.IsInf(v, 1) {
		return "exact"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// WriteTable writes the report for people: one row per format with its mean SQNR (over the
// modules, of each one's SQNR in dB, as pdq report prints it) overall and per projection, the
// lowest module's, its worst layer and projection, its bytes and, with a serving setup, the
// decode server's weights and KV-cache tokens.
func (r *Report) WriteTable(w io.Writer) error {
	if len(r.Formats) == 0 {
		return nil
	}
	fmt.Fprintf(w, "%d of %d target modules measured (%s of source weights), method %s\n",
		r.Measured, r.Targets, units.Bytes(r.MeasuredBytes), r.Method)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	serve := r.Formats[0].Serving != nil
	head := []string{"format", "bits/w", "mean SQNR dB"}
	for _, p := range r.Formats[0].Projections {
		head = append(head, p.Projection)
	}
	head = append(head, "min SQNR dB", "worst layer", "targets", "decode/")
	if serve {
		head = append(head, "weights/GPU", "KV/GPU", "tokens/server")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, s := range r.Formats {
		row := []string{s.Format, strconv.FormatFloat(s.BitsPerWeight, 'f', 2, 64), db(float64(s.Overall.MeanSQNR))}
		for _, p := range s.Projections {
			row = append(row, db(float64(p.MeanSQNR)))
		}
		row = append(row, db(float64(s.Overall.MinSQNR)), fmt.Sprintf("%s L%d %s", db(float64(s.Worst.MeanSQNR)), s.Worst.Layer, s.Worst.Projection),
			units.Bytes(s.TargetBytes), units.Bytes(s.DecodeBytes))
		if c := s.Serving; c != nil {
			row = append(row, units.Bytes(c.Weights.PerGPU), units.Bytes(c.KVBytes), strconv.FormatInt(c.Tokens, 10))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Serving != "" {
		fmt.Fprintf(w, "decode server: %s\n", r.Serving)
	}
	for _, s := range r.Formats {
		for _, wn := range s.Warnings {
			fmt.Fprintf(w, "warning: %s: %s\n", s.Format, wn)
		}
	}
	return nil
}

// WriteCSV writes one line per format and group of modules: every layer and projection
// together (layer "all", projection "all"), each projection, each layer and each layer and
// projection.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"format", "layer", "projection", "modules", "elements", "mean_sqnr_db", "min_sqnr_db", "sqnr_db", "clipped", "target_bytes", "decode_bytes"})
	for _, s := range r.Formats {
		figs := append([]Figure{s.Overall}, s.Projections...)
		figs = append(figs, s.Layers...)
		figs = append(figs, s.Cells...)
		for _, f := range figs {
			layer, proj := "all", "all"
			if f.Layer >= 0 {
				layer = strconv.Itoa(f.Layer)
			}
			if f.Projection != "" {
				proj = f.Projection
			}
			g := func(v report.Float) string { return strconv.FormatFloat(float64(v), 'g', -1, 64) }
			cw.Write([]string{s.Format, layer, proj, strconv.Itoa(f.Modules), strconv.FormatInt(f.Elements, 10), g(f.MeanSQNR), g(f.MinSQNR), g(f.SQNR),
				strconv.FormatInt(f.Clipped, 10), strconv.FormatInt(s.TargetBytes, 10), strconv.FormatInt(s.DecodeBytes, 10)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// Chart is the report's picture: mean SQNR per layer, one line per format.
func (r *Report) Chart() reportview.LineChart {
	c := reportview.LineChart{
		Title:  fmt.Sprintf("mean SQNR per layer by decode format (%d of %d modules, %s)", r.Measured, r.Targets, r.Method),
		XLabel: "layer", YLabel: "mean SQNR dB",
	}
	for _, s := range r.Formats {
		ser := reportview.Series{Name: s.Format}
		for _, l := range s.Layers {
			ser.X = append(ser.X, float64(l.Layer))
			ser.Y = append(ser.Y, float64(l.MeanSQNR))
		}
		c.Series = append(c.Series, ser)
	}
	return c
}
