package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"pdq/quantize/convert"
	"pdq/quantize/report"
)

// splitOptions are the flags of pdq convert that split a conversion across machines.
type splitOptions struct {
	part  string // I/N, "all", or "" (then the environment decides)
	parts int    // the part count when the index comes from JOB_COMPLETION_INDEX
	merge bool
}

// splitHelp is the part of convert's --help that explains splitting.
const splitHelp = `
Split across machines: --part I/N converts only part I (counted from 0) of N, writing its own
shards and journal under the shared DIR; any number of parts run at once on machines that mount
DIR (NFS, Lustre, a FUSE-mounted bucket), and a part rerun after a crash resumes. When every part
is done, the same command with --merge (instead of --part) checks them against the same source
and options and writes the index, config.json and report.json: the result is byte-identical to a
single run. Without --part the part comes from the batch system: SLURM_ARRAY_TASK_ID (less
SLURM_ARRAY_TASK_MIN) of SLURM_ARRAY_TASK_COUNT in a Slurm job array, or Kubernetes'
JOB_COMPLETION_INDEX of --parts N (or PDQ_PARTS) in an Indexed Job; --parts also overrides the
Slurm count (give it when resubmitting single indexes, --array=5: Slurm then counts only that
submission). An explicit --part always wins; --part all ignores the environment. See
pdq plan SRC --parts N for what each part writes, and docs/SCALE.md for job files.`

func (o *splitOptions) add(fl *pflag.FlagSet) {
	fl.StringVar(&o.part, "part", "", "convert part I/N only (0-based; default: from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX when set; 'all': the whole conversion)")
	fl.IntVar(&o.parts, "parts", 0, "the number of parts, with JOB_COMPLETION_INDEX (default PDQ_PARTS) or to override SLURM_ARRAY_TASK_COUNT")
	fl.BoolVar(&o.merge, "merge", false, "finish a conversion split with --part: check every part and write the index, configs and report")
}

// resolve returns the part to convert and where it came from ("" for the whole conversion).
func (o *splitOptions) resolve(getenv func(string) string) (convert.Part, string, error) {
	if o.merge {
		if o.part != "" && o.part != "all" {
			return convert.Part{}, "", usagef("convert: --merge finishes every part: give it without --part")
		}
		return convert.Part{}, "", nil
	}
	switch o.part {
	case "all":
		return convert.Part{}, "", nil
	case "":
	default:
		pt, err := convert.ParsePart(o.part)
		if err != nil {
			return pt, "", usageError{fmt.Errorf("convert: --part: %w", err)}
		}
		return pt, "--part", nil
	}
	count := func(fallback, fallbackName string) (int, string, error) {
		if o.parts > 0 {
			return o.parts, "--parts", nil
		}
		for _, e := range []struct{ v, name string }{{getenv("PDQ_PARTS"), "PDQ_PARTS"}, {fallback, fallbackName}} {
			if e.v == "" || e.name == "" {
				continue
			}
			n, err := strconv.Atoi(e.v)
			if err != nil || n < 1 {
				return 0, "", usagef("convert: %s=%q is not a part count", e.name, e.v)
			}
			return n, e.name, nil
		}
		return 0, "", nil
	}
	index := func(name string, min int) (int, error) {
		i, err := strconv.Atoi(getenv(name))
		if err != nil {
			return 0, usagef("convert: %s=%q is not a part index", name, getenv(name))
		}
		return i - min, nil
	}
	var pt convert.Part
	var from string
	switch {
	case getenv("SLURM_ARRAY_TASK_ID") != "":
		lo := 0
		if v := getenv("SLURM_ARRAY_TASK_MIN"); v != "" {
			lo, _ = strconv.Atoi(v)
		}
		i, err := index("SLURM_ARRAY_TASK_ID", lo)
		if err != nil {
			return pt, "", err
		}
		n, by, err := count(getenv("SLURM_ARRAY_TASK_COUNT"), "SLURM_ARRAY_TASK_COUNT")
		if err != nil {
			return pt, "", err
		}
		if n == 0 {
			return pt, "", usagef("convert: SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT: give --parts N (or --part all for the whole conversion)")
		}
		pt, from = convert.Part{Index: i, Count: n}, "SLURM_ARRAY_TASK_ID of "+by
	case getenv("JOB_COMPLETION_INDEX") != "":
		i, err := index("JOB_COMPLETION_INDEX", 0)
		if err != nil {
			return pt, "", err
		}
		n, by, err := count("", "")
		if err != nil {
			return pt, "", err
		}
		if n == 0 {
			return pt, "", usagef("convert: JOB_COMPLETION_INDEX is set but not the number of parts: give --parts N or PDQ_PARTS (the Job's completions), or --part all")
		}
		pt, from = convert.Part{Index: i, Count: n}, "JOB_COMPLETION_INDEX of "+by
	default:
		if o.parts > 0 {
			return pt, "", usagef("convert: --parts %d needs a part index: --part I/%d, or JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID from the batch system", o.parts, o.parts)
		}
		return pt, "", nil
	}
	if pt.Index < 0 || pt.Index >= pt.Count {
		return pt, "", usagef("convert: part %d of %d (from %s): the index must be below the count", pt.Index, pt.Count, from)
	}
	return pt, from, nil
}

// run converts the part (or the whole) or merges.
func (o *splitOptions) run(ctx context.Context, p *convert.Plan, dir string, ro convert.RunOptions) (*report.Report, error) {
	if o.merge {
		return convert.Merge(ctx, p, dir, ro)
	}
	return convert.Run(ctx, p, dir, ro)
}

// partSummary is what one part writes, in pdq plan --parts and in a part's --json.
type partSummary struct {
	Part     string   `json:"part"`
	Files    []string `json:"files"`
	Bytes    int64    `json:"bytes"`
	CPUHours float64  `json:"estimated_cpu_hours"`
}

func summarizeParts(p *convert.Plan, n int) ([]partSummary, error) {
	parts, err := p.Partition(n)
	if err != nil {
		return nil, err
	}
	out := make([]partSummary, len(parts))
	for i, pp := range parts {
		s := partSummary{Part: pp.Part.String(), Files: []string{}, Bytes: pp.Bytes, CPUHours: pp.Cost / 3600}
		for _, u := range pp.Units {
			s.Files = append(s.Files, u.Key)
		}
		out[i] = s
	}
	return out, nil
}

// printParts writes the table of pdq plan --parts.
func printParts(w io.Writer, parts []partSummary) {
	fmt.Fprintf(w, "\n%d parts (estimated CPU time from the AVX-512 kernel speeds in docs/QUALITY.md; merge after all):\n", len(parts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  part\tfiles\tbytes\test. CPU\tfirst file … last file")
	for _, s := range parts {
		span := "-"
		if len(s.Files) > 0 {
			span = s.Files[0]
			if len(s.Files) > 1 {
				span += " … " + s.Files[len(s.Files)-1]
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", s.Part, len(s.Files), formatBytes(s.Bytes), formatCPU(s.CPUHours), span)
	}
	tw.Flush()
}

func formatCPU(hours float64) string {
	switch {
	case hours >= 1:
		return fmt.Sprintf("%.1f h", hours)
	case hours*60 >= 1:
		return fmt.Sprintf("%.1f min", hours*60)
	}
	return fmt.Sprintf("%.1f s", hours*3600)
}

// reportPartDone tells what a finished part wrote and what comes next.
func reportPartDone(w io.Writer, p *convert.Plan, pt convert.Part, from, src, dir string, asJSON bool) error {
	parts, err := summarizeParts(p, pt.Count)
	if err != nil {
		return err
	}
	s := parts[pt.Index]
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	by := ""
	if from != "--part" {
		by = " (from " + from + ")"
	}
	fmt.Fprintf(w, "part %s%s done: %d file(s), %s in %s\n", s.Part, by, len(s.Files), formatBytes(s.Bytes), dir)
	fmt.Fprintf(w, "when all %d parts are done: pdq convert %s --out %s --merge (with the same options)\n", pt.Count, shellQuote(src), shellQuote(dir))
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// getenv is the environment the part comes from (a variable so tests can replace it).
var getenv = os.Getenv
