package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"pdq/internal/termsafe"
	"pdq/quantize/report"
	"pdq/reportview"
)

func init() { commands = append(commands, newReportCmd) }

// reportOptions are the flags of pdq report.
type reportOptions struct {
	top              int
	sort             string
	filter           string
	roles            []string
	output           string
	asJSON, asCSV    bool
	failSQNRBelow    float64
	failRelRMSEAbove float64
	against          string
	plot             string
	html             string
	quiet            bool
}

func newReportCmd() *cobra.Command {
	var o reportOptions
	cmd := &cobra.Command{
		Use:   "report REPORT.json|DIR",
		Short: "Summarize a conversion's error report, check thresholds, compare two runs, draw pictures",
		Long: `Report reads the report.json that pdq convert writes (or DIR/report.json) and prints a summary per output, role and
scheme (tensor count, elements, stored bytes and bits per weight, mean and min SQNR, worst relative
RMSE), then the --top worst tensors under --sort. The mean SQNR is the mean over the tensors of
each tensor's SQNR in dB (mean_sqnr_db in --json), the statistic convert and verify print too. --filter, --role and --output narrow every part
of the output, thresholds included.

With --against B.json it pairs the tensors of both runs by output and module (rtn against mse,
g32 against g128, ...) and prints the per-role mean ΔSQNR = A − B and the biggest movers; a
positive Δ means REPORT.json is closer to the source.

--fail-sqnr-below and --fail-rel-rmse-above make it exit with status 1 when a selected tensor is
over a limit, listing the offenders once (in the table, or on stderr with -q). --plot draws
heatmaps of SQNR (ΔSQNR with --against) by layer and expert for each routed-expert projection,
with histograms of per-tensor values, and says what it wrote; --html writes
one self-contained page (no network needed) with the summary, a sortable table and the pictures.`,
		Example: `  pdq report /data/glm5-pd/report.json
  pdq report out/report.json --role routed_experts --sort rel_rmse --top 50
  pdq report out/report.json --output decode --fail-sqnr-below 18 -q     # CI gate
  pdq report mse/report.json --against rtn/report.json                   # what mse bought
  pdq report out/report.json --plot sqnr.png --html report.html
  pdq report out/report.json --top 0 --csv > tensors.csv`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.top, "top", 20, "tensors (or movers) to list; 0 for all")
	fl.StringVar(&o.sort, "sort", "sqnr", "order: sqnr (lowest first), rel_rmse or max_abs_err (highest first), name, weighted_sqnr (a calibrated run's activation-weighted SQNR, lowest first); with --against, by the size of the change")
	fl.StringVar(&o.filter, "filter", "", "only tensors whose name matches this regular expression")
	fl.StringSliceVar(&o.roles, "role", nil, "only these roles (repeat or comma-separate): routed_experts, shared_experts, attention, ...")
	fl.StringVar(&o.output, "output", "", "only one output: prefill or decode")
	fl.BoolVar(&o.asJSON, "json", false, "print JSON")
	fl.BoolVar(&o.asCSV, "csv", false, "print the listed tensors (or movers) as CSV")
	fl.Float64Var(&o.failSQNRBelow, "fail-sqnr-below", math.Inf(-1), "exit with status 1 if a selected tensor's SQNR (dB) is below this")
	fl.Float64Var(&o.failRelRMSEAbove, "fail-rel-rmse-above", math.Inf(1), "exit with status 1 if a selected tensor's relative RMSE is above this")
	fl.StringVar(&o.against, "against", "", "compare with this second report.json or output directory (deltas are REPORT − this)")
	fl.StringVar(&o.plot, "plot", "", "draw heatmaps and histograms into this .png or .svg file")
	fl.StringVar(&o.html, "html", "", "write a self-contained HTML page to this file")
	fl.BoolVarP(&o.quiet, "quiet", "q", false, "print no table: only the files written and the tensors over a threshold (on stderr), for CI")
	return cmd
}

// parse checks the flags that do not need the report and builds the query.
func (o *reportOptions) parse() (reportview.Query, error) {
	var q reportview.Query
	if o.asJSON && o.asCSV {
		return q, usagef("report: --json and --csv exclude each other")
	}
	if o.top < 0 {
		return q, usagef("report: --top %d: want 0 (all) or more", o.top)
	}
	key, err := reportview.ParseSortKey(o.sort)
	if err != nil {
		return q, usagef("report: --sort: %v", err)
	}
	if o.output != "" && o.output != "prefill" && o.output != "decode" {
		return q, usagef("report: --output %q: want prefill or decode", o.output)
	}
	if o.filter != "" {
		re, err := regexp.Compile(o.filter)
		if err != nil {
			return q, usagef("report: --filter: %v", err)
		}
		q.Filter = re
	}
	if o.plot != "" {
		if _, err := plotFormat(o.plot); err != nil {
			return q, usagef("report: --plot: %v", err)
		}
	}
	if math.IsNaN(o.failSQNRBelow) || math.IsNaN(o.failRelRMSEAbove) {
		return q, usagef("report: thresholds must be numbers")
	}
	for _, r := range o.roles {
		if r = strings.TrimSpace(r); r != "" {
			q.Roles = append(q.Roles, r)
		}
	}
	q.Output, q.Sort, q.Top = o.output, key, o.top
	return q, nil
}

func plotFormat(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		return reportview.FormatPNG, nil
	case ".svg":
		return reportview.FormatSVG, nil
	}
	return "", fmt.Errorf("%q: the name must end in .png or .svg", path)
}

func runReport(ctx context.Context, w, errw io.Writer, path string, o reportOptions) error {
	q, err := o.parse()
	if err != nil {
		return err
	}
	path, o.against = reportPath(path), reportPath(o.against)
	rep, err := loadReport(path)
	if err != nil {
		return err
	}
	var repB *report.Report
	if o.against != "" {
		if repB, err = loadReport(o.against); err != nil {
			return err
		}
	}
	if err := checkRoles(q.Roles, rep, repB); err != nil {
		return err
	}
	// The files asked for must be writable before the table is printed: a refusal after it
	// would leave the table looking like the run's result.
	for _, f := range []struct{ flag, path string }{{"--plot", o.plot}, {"--html", o.html}} {
		if f.path != "" {
			if err := checkWritable(f.path); err != nil {
				return fmt.Errorf("report: %s %s: %w", f.flag, f.path, err)
			}
		}
	}
	th := reportview.Thresholds{SQNRBelow: o.failSQNRBelow, RelRMSEAbove: o.failRelRMSEAbove}
	v := reportview.NewView(path, rep, q, th)
	if repB != nil {
		v.Compare(o.against, repB)
	}
	switch {
	case o.quiet:
	case o.asJSON:
		err = reportview.WriteJSON(w, v)
	case o.asCSV:
		err = reportview.WriteCSV(w, v)
	default:
		err = reportview.WriteTable(w, v)
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.plot != "" {
		format, _ := plotFormat(o.plot)
		if err := writeFileAtomic(o.plot, func(w io.Writer) error { return reportview.WritePlot(w, v, format) }); err != nil {
			return err
		}
		what := "SQNR heatmaps (layer x expert, one panel per routed-expert projection) and histograms"
		if v.Diff != nil {
			what = "ΔSQNR heatmaps (layer x expert, one panel per routed-expert projection) and histograms"
		}
		fmt.Fprintf(errw, "wrote %s: %s of %d selected tensors\n", o.plot, what, len(v.Selected))
	}
	if o.html != "" {
		if err := writeFileAtomic(o.html, func(w io.Writer) error { return reportview.WriteHTML(w, v) }); err != nil {
			return err
		}
		table := fmt.Sprintf("%d tensors", len(v.Rows))
		if len(v.Rows) < len(v.Selected) {
			table = fmt.Sprintf("the %d of %d selected tensors that --top %d shows (--top 0 for all)", len(v.Rows), len(v.Selected), o.top)
		}
		fmt.Fprintf(errw, "wrote %s: summary, sortable table of %s and pictures, one self-contained page\n", o.html, table)
	}
	// The output lists the offenders (the table's FAIL section, the JSON "failures"); the error
	// lists them when nothing printed them (-q, and --csv, which lists the --top rows).
	return thresholdError(v, o.quiet || o.asCSV)
}

// loadReport loads a report, saying what to give instead when there is no file at path.
func loadReport(path string) (*report.Report, error) {
	rep, err := reportview.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file (give the report.json or the --out directory of pdq convert)", path)
	}
	return rep, err
}

// reportPath reads a directory (a conversion's output) as its report.json.
func reportPath(p string) string {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return filepath.Join(p, "report.json")
	}
	return p
}

// checkRoles refuses a --role that no tensor of the report has (usually a typo).
func checkRoles(roles []string, reps ...*report.Report) error {
	have := map[string]bool{}
	for _, rep := range reps {
		if rep == nil {
			continue
		}
		for i := range rep.Tensors {
			have[rep.Tensors[i].Role] = true
		}
	}
	for _, r := range roles {
		if !have[r] {
			known := make([]string, 0, len(have))
			for k := range have {
				known = append(known, k)
			}
			slices.Sort(known)
			return usagef("report: --role %q: no tensor has this role (the report has: %s)", r, strings.Join(known, ", "))
		}
	}
	return nil
}

// thresholdError is the failure (exit status 1) when tensors are over the thresholds, or nil; it
// lists them when list is set, and otherwise points at the table above.
func thresholdError(v *reportview.View, list bool) error {
	if len(v.Failures) == 0 {
		return nil
	}
	if !list {
		return fmt.Errorf("%d of %d selected tensors over the thresholds (listed in the output)", len(v.Failures), len(v.Selected))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d selected tensors over the thresholds:", len(v.Failures), len(v.Selected))
	for i, f := range v.Failures {
		if i == 10 {
			fmt.Fprintf(&b, "\n  ... and %d more (--json lists all)", len(v.Failures)-10)
			break
		}
		fmt.Fprintf(&b, "\n  %s %s: %s", termsafe.Line(f.Output), termsafe.Line(f.Tensor), strings.Join(f.Reasons, "; "))
	}
	return fmt.Errorf("%s", b.String())
}

// checkWritable tells whether a file can be written at path (a temporary file created and removed
// beside it), saying why not without naming the temporary file.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("is a directory (give a file name)")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("cannot write in %s: %w", filepath.Dir(path), pe.Err)
		}
		return err
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}

// writeFileAtomic renders into memory, then writes path through a temporary name and a rename,
// so a failed run leaves no partial file that looks finished.
func writeFileAtomic(path string, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err = tmp.Write(buf.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	return nil
}
