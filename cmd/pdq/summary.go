package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"pdq/internal/termsafe"
	"pdq/quantize/report"
	"pdq/reportview"
)

// writeGroups prints the per-output, role and scheme summary of rows with the statistics of pdq
// report (reportview.Summarize), so that every command shows the same numbers for one run: the
// mean over a group's tensors of each tensor's SQNR in dB ("mean SQNR dB"), not the SQNR pooled
// over all the group's elements (report.json's summary "sqnr_db").
func writeGroups(w io.Writer, rows []report.TensorReport, withOutput bool) {
	groups := reportview.Summarize(rows)
	rtn := false
	for _, g := range groups {
		rtn = rtn || g.MeanRTNSQNR != nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"role", "scheme", "tensors", "mean SQNR dB", "min SQNR dB"}
	if withOutput {
		head = append([]string{"output"}, head...)
	}
	if rtn {
		head = append(head, "mean rtn dB")
	}
	fmt.Fprintln(tw, strings.Join(append(head, "worst rel RMSE"), "\t")+"\t")
	for _, g := range groups {
		cells := []string{g.Role, g.Scheme, strconv.Itoa(g.Tensors), dB(float64(g.MeanSQNR)), dB(float64(g.MinSQNR))}
		if withOutput {
			cells = append([]string{g.Output}, cells...)
		}
		if rtn {
			r := "-"
			if g.MeanRTNSQNR != nil {
				r = dB(float64(*g.MeanRTNSQNR))
			}
			cells = append(cells, r)
		}
		cells = append(cells, strconv.FormatFloat(float64(g.WorstRelRMSE), 'f', 4, 64))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
}

func dB(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// formatCounts prints a count per name in name order: "none 6, weighted 18".
func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// writeNotes prints the modules kept dense and the plan's warnings (to stderr: they are not the
// command's result).
func writeNotes(w io.Writer, skipped, warnings []string) {
	for _, s := range skipped { // module names come from the source's headers
		fmt.Fprintf(w, "kept dense (unsupported): %s\n", termsafe.Line(s))
	}
	for _, s := range warnings {
		fmt.Fprintf(w, "warning: %s\n", termsafe.Line(s))
	}
}
