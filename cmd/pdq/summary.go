package main

import (
	"bytes"
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
	groupsTable(w, rows, withOutput, true)
}

// writeGroupsFit is writeGroups with the output column, narrowed when it is wider than columns
// (a terminal's; 0: no limit): one table per output under its name, without the rtn column
// (pdq report shows it), so that 80 columns do not wrap the rows.
func writeGroupsFit(w io.Writer, rows []report.TensorReport, columns int) {
	var wide bytes.Buffer
	groupsTable(&wide, rows, true, true)
	fits := true
	for _, l := range strings.Split(wide.String(), "\n") {
		fits = fits && cols(l) < columns
	}
	if columns <= 0 || fits {
		io.Copy(w, &wide)
		return
	}
	for _, out := range []string{"prefill", "decode"} {
		var part []report.TensorReport
		for _, r := range rows {
			if r.Output == out {
				part = append(part, r)
			}
		}
		if len(part) > 0 {
			fmt.Fprintf(w, "%s:\n", out)
			groupsTable(w, part, false, false)
		}
	}
}

// groupsTable prints the table of writeGroups; withRTN allows the rtn column where a group has
// a value for it.
func groupsTable(w io.Writer, rows []report.TensorReport, withOutput, withRTN bool) {
	groups := reportview.Summarize(rows)
	rtn := false
	for _, g := range groups {
		rtn = rtn || withRTN && g.MeanRTNSQNR != nil
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
