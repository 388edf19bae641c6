package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"pdq/internal/termsafe"
	"pdq/quantize/convert"
	"pdq/quantize/report"
)

func init() { commands = append(commands, newConvertCmd) }

// convertOptions are the flags of pdq convert that are not plan flags.
type convertOptions struct {
	out           string
	workers       int
	readers       int
	maxMemory     int64
	prefillMode   string
	resume, force bool
	quiet, asJSON bool
	failSQNRBelow float64
	device        string
	split         splitOptions
}

func newConvertCmd() *cobra.Command {
	var f planFlags
	var o convertOptions
	cmd := &cobra.Command{
		Use:   "convert SRC --out DIR",
		Short: "Write the prefill (FP8) and decode (INT4) checkpoints and the error report",
		Long: `Convert reads SRC once, in file order, and writes:

  DIR/prefill/     FP8 e4m3 128x128 blocks (an FP8-block source's shards are copied bit-exact:
                   cloned where DIR's file system shares blocks, XFS or btrfs with SRC on it,
                   else written from the bytes read for the conversion; --prefill-mode)
  DIR/decode/      routed experts as group-wise INT4 in the compressed-tensors pack-quantized
                   layout, the rest BF16 (or FP8 with --decode-dense fp8); loads in vLLM and SGLang;
                   --decode-format picks another format for the routed experts:
` + decodeFormatList(21) + `                   pdq plan names the GPUs each engine loads the format on (docs/SERVING.md).
                   A --group-size that contradicts a format's fixed groups is refused.
                   --method rtn is the compressed-tensors rule of each format, mse (default)
                   the scale search.
  DIR/report.json  per-tensor RMSE, relative RMSE, SQNR, max error and cosine of every quantized
                   tensor, measured on the bytes written; read it with pdq report

Memory stays under --max-memory plus a fixed overhead whatever the checkpoint size. Shards are
written under temporary names, their whole size reserved on disk at creation on Linux (a full
disk fails then, naming the shard), and renamed when complete; a journal records finished shards
and every finished tensor of the shards still open (with a checksum of its bytes), so rerunning
the same command (or --resume) after a crash, kill -9 or Ctrl-C keeps every finished tensor and
ends byte-identical to an uninterrupted run; it says how many shards it keeps ("resuming: 12 of
91 decode shards and 40 of 142 prefill shards already done (verified)": size and CRC-32C checked)
and the bar counts only the work left. Rerunning a finished conversion says "already complete".
The same input gives byte-identical output for any --workers and --readers.

` + wrapText("SRC may arrive already quantized: "+convert.QuantizedSources+`. Their weights are
decoded exactly: prefill/ gets FP8 blocks of the decoded values, and decode/ holds the source's
own tensors unchanged where it is asked for the source's format with the same group size (Kimi's
g32 is the default; scheme "passed" in the summary), else the decoded values quantized anew.`, 98) + `

The summary shows, per output, role and scheme, the mean over the tensors of each tensor's SQNR
in dB (the statistic of pdq report and pdq verify), the lowest, the rtn baseline's mean and the
worst relative RMSE. Warnings and progress go to stderr; -v also logs the plan's decisions and
every finished shard with its time.
` + splitHelp + `

Environment: once a run has written its first GiB, large output writes go around the page cache
(O_DIRECT, in the background; not on tmpfs). PDQ_DIRECT_IO=0 writes everything through the cache
(for a network file system where direct writes are slow), PDQ_DIRECT_IO=1 writes directly from
the first byte. PDQ_NOSIMD=1 runs the scalar kernels instead of the vector ones (AVX2 or AVX-512,
in an amd64 build made with the Makefile; the same bytes, slower); pdq --version names the loop
set in use.`,
		Example: `  pdq convert /models/GLM-5-FP8 --out /data/glm5-pd
  pdq convert /models/GLM-5-FP8 --out /data/glm5-pd --group-size 128 --method rtn
  pdq convert /models/GLM-4.7 --out /data/glm47 --only decode --fail-sqnr-below 18
  pdq convert /models/GLM-5-FP8 --out /data/glm5-` + string(exampleFormat().Format) + ` --decode-format ` + string(exampleFormat().Format) + ` --only decode
  pdq convert /models/GLM-5-FP8 --out /shared/g5 --part 2/8    # on 8 machines, one part each
  pdq convert /models/GLM-5-FP8 --out /shared/g5 --merge       # then once, after all 8
  pdq-cuda convert /models/GLM-5 --out /data/g5 --device cuda:0,1  # GPUs 0 and 1 (pdq-cuda: make build-cuda)`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.out == "" {
				return usagef("convert: --out DIR is required")
			}
			if o.resume && o.force {
				return usagef("convert: --resume continues DIR and --force deletes it: give one of them")
			}
			if o.workers < 0 || o.readers < 0 {
				return usagef("convert: --workers and --readers count goroutines: give a positive number, or 0 for the default")
			}
			return runConvert(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], &f, o)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.out, "out", "", "output directory (gets prefill/, decode/ and report.json)")
	fl.IntVar(&o.workers, "workers", 0, "compute workers (default: number of CPUs); the output does not depend on it")
	fl.IntVar(&o.readers, "readers", 0, fmt.Sprintf("goroutines reading SRC, each slab once (default: one per %d workers; one reads about 5 GB/s from the page cache); the output does not depend on it", convert.WorkersPerReader))
	o.maxMemory = convert.DefaultMaxMemory
	fl.Var(bytesValue{&o.maxMemory}, "max-memory", "tensor bytes in flight; peak memory stays near this plus about 256 MiB")
	fl.StringVar(&o.prefillMode, "prefill-mode", "copy", "FP8 sources: copy the shards into prefill/ (a clone sharing SRC's blocks where the file system makes one, else written), write them (never a clone), or link them (hard links when on the same filesystem, else copy)")
	fl.BoolVar(&o.resume, "resume", false, "continue an interrupted conversion in DIR (rerunning the same command also resumes when DIR holds its journal)")
	fl.BoolVar(&o.force, "force", false, "start over in a non-empty DIR, deleting earlier outputs")
	fl.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar and no summary")
	fl.BoolVar(&o.asJSON, "json", false, "print a JSON summary (the report without the per-tensor rows)")
	fl.Float64Var(&o.failSQNRBelow, "fail-sqnr-below", math.Inf(-1), "exit with status 1 if any tensor of the decode format ("+convert.FormatList(true, "or")+") has an SQNR (dB) below this")
	o.split.add(fl)
	fl.StringVar(&o.device, "device", "auto", "compute device: auto (every GPU when there is one, else the CPU), cpu, cuda (every GPU; CUDA_VISIBLE_DEVICES applies) or cuda:0,3 (some); GPUs need a build with make build-cuda")
	return cmd
}

func runConvert(ctx context.Context, w, errw io.Writer, src string, f *planFlags, o convertOptions) error {
	part, partFrom, err := o.split.resolve(getenv)
	if err != nil {
		return err
	}
	backend, device, err := pickBackend(o.device)
	if err != nil {
		return err
	}
	p, ck, err := openPlan(src, f)
	if err != nil {
		return err
	}
	defer ck.Close()
	if o.maxMemory > 0 {
		// Keep the garbage collector honest about the budget: the tensor bytes in flight plus
		// the fixed overhead of buffers and headers.
		debug.SetMemoryLimit(o.maxMemory + 192<<20)
	}
	if !o.resume && !o.force {
		if _, err := os.Stat(o.out + "/" + convert.JournalName); err == nil {
			o.resume = true // the same command again continues an interrupted run
			slog.Debug("resume: the output directory holds a journal; continuing it", "out", o.out)
		}
	}
	ro := convert.RunOptions{
		Workers: o.workers, Readers: o.readers, MaxMemory: o.maxMemory, PrefillMode: convert.PrefillMode(o.prefillMode), Existing: o.existing(),
		Backend: backend, Device: device, Tool: "pdq " + version, Part: part,
	}
	talk := !o.quiet
	var resumed convert.ResumeInfo
	ro.Events.Resumed = func(ri convert.ResumeInfo) {
		resumed = ri
		slog.Debug("journal: finished shards kept (size and CRC-32C checked)", "prefill", ri.PrefillDone, "prefill_shards", ri.PrefillShards,
			"decode", ri.DecodeDone, "decode_shards", ri.DecodeShards)
		if talk && ri.Any() && !ri.Complete() {
			fmt.Fprintf(errw, "resuming: %s already done (verified)\n", resumeCounts(ri))
		}
	}
	start := time.Now()
	var cloned atomic.Int64
	ro.Events.ShardDone = func(e convert.ShardEvent) {
		slog.Debug("shard finished", "output", e.Output, "file", e.File, "bytes", e.Bytes, "cloned", e.Cloned, "elapsed", time.Since(start).Round(time.Millisecond))
		if e.Cloned {
			cloned.Add(1)
		}
	}
	var bar *progressBar
	if talk && !o.asJSON {
		if fd, ok := terminalFD(errw); ok {
			bar = newProgressBar(errw, fd, "convert ["+device+"]")
			ro.Progress = bar.Update
			activeBar.Store(bar)
			defer activeBar.Store(nil)
		}
	}
	_, statErr := os.Stat(filepath.Join(o.out, "report.json"))
	if !o.split.merge {
		if err := checkSpace(p, o.out, part, ro.PrefillMode); err != nil {
			return err
		}
	}
	rep, err := o.split.run(ctx, p, o.out, ro)
	if bar != nil {
		bar.Stop() // where it was: an interrupted run does not jump to 100%
	}
	if err != nil {
		if isBadOptions(err) || errors.Is(err, convert.ErrOverlapsSource) || errors.Is(err, convert.ErrBadPart) {
			return usageError{err} // a run option (--prefill-mode) or an --out that overlaps SRC
		}
		return withSpace(err, planWrites(p, ro.PrefillMode), o.out)
	}
	if !part.Whole() {
		if o.quiet {
			return checkSQNRFloor(rep, o.failSQNRBelow)
		}
		if err := reportPartDone(w, p, part, partFrom, src, o.out, o.asJSON); err != nil {
			return err
		}
		return checkSQNRFloor(rep, o.failSQNRBelow)
	}
	slog.Debug("convert finished", "elapsed", time.Since(start).Round(time.Millisecond))
	complete := resumed.Complete() && resumed.Any() && statErr == nil // shards and report were there
	if o.asJSON {
		short := *rep
		short.Tensors = []report.TensorReport{} // the rows are in report.json
		enc := json.NewEncoder(termsafe.JSONWriter(w))
		enc.SetIndent("", "  ")
		if err := enc.Encode(short); err != nil {
			return err
		}
	} else if complete && talk {
		fmt.Fprintf(w, "already complete: %s (nothing to do; pdq report %s shows the summary)\n", o.out, o.out)
	} else if talk {
		printReportSummary(w, rep, o.out)
		if n := cloned.Load(); n > 0 {
			fmt.Fprintf(w, "prefill: %d source shards cloned (their blocks shared with SRC, nothing written)\n", n)
		}
		writeNotes(errw, rep.Skipped, rep.Warnings)
		warnEngines(errw, o.out)
	}
	return checkSQNRFloor(rep, o.failSQNRBelow)
}

// existing maps --resume and --force to what the conversion does with a non-empty DIR.
func (o *convertOptions) existing() convert.Existing {
	switch {
	case o.force:
		return convert.Restart
	case o.resume:
		return convert.Resume
	}
	return convert.Refuse
}

// resumeCounts says how many shards of each output are done: "12 of 91 decode shards and 40 of
// 142 prefill shards".
func resumeCounts(ri convert.ResumeInfo) string {
	var parts []string
	if ri.DecodeShards > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d decode shards", ri.DecodeDone, ri.DecodeShards))
	}
	if ri.PrefillShards > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d prefill shards", ri.PrefillDone, ri.PrefillShards))
	}
	s := strings.Join(parts, " and ")
	if ri.KeptTensors > 0 {
		s += fmt.Sprintf(", and %d tensors of unfinished shards,", ri.KeptTensors)
	}
	return s
}

// checkSQNRFloor fails when a tensor of a 4-bit decode format (a row of the INT4 or FP4 family)
// is below the floor, listing the offenders.
func checkSQNRFloor(rep *report.Report, floor float64) error {
	var bad []report.TensorReport
	for _, t := range rep.Tensors {
		f := report.Info(report.Scheme(t.Scheme)).Family
		if (f == report.FamilyInt4 || f == report.FamilyFP4) && float64(t.SQNR) < floor {
			bad = append(bad, t)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d 4-bit tensor(s) below %.2f dB SQNR:", len(bad), floor)
	for i, t := range bad {
		if i == 10 {
			msg += fmt.Sprintf("\n  ... and %d more (see report.json)", len(bad)-10)
			break
		}
		msg += fmt.Sprintf("\n  %s  %s dB", termsafe.Line(t.Tensor), belowFloor(float64(t.SQNR), floor))
	}
	return fmt.Errorf("%s", msg)
}

// belowFloor formats v, which is below floor, with enough decimals to show that it is: 18.499
// is "18.499", not "18.50" next to a floor of 18.50.
func belowFloor(v, floor float64) string {
	for prec := 2; prec < 17; prec++ {
		if s := strconv.FormatFloat(v, 'f', prec, 64); s != strconv.FormatFloat(floor, 'f', prec, 64) {
			return s
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// worstLines lays out the worst tensors, numbers first and the name last; within columns (0: no
// limit) a long name is shortened keeping its layer and expert (shortName) rather than wrapped.
func worstLines(rows []report.TensorReport, columns int) []string {
	scheme := 0
	for _, t := range rows {
		scheme = max(scheme, len(t.Scheme))
	}
	lines := make([]string, len(rows))
	for i, t := range rows {
		head := fmt.Sprintf("  %6.2f dB  rel RMSE %.4f  %-*s  ", float64(t.SQNR), float64(t.RelRMSE), scheme, termsafe.Line(t.Scheme))
		name := termsafe.Line(t.Tensor)
		if room := columns - 1 - cols(head); columns > 0 && room >= 16 {
			name = shortName(name, room)
		}
		lines[i] = head + name
	}
	return lines
}

// printReportSummary prints the per-role summary (the statistics of pdq report) and the worst
// tensors.
func printReportSummary(w io.Writer, rep *report.Report, out string) {
	columns := 0 // the terminal's width, when the summary goes to one
	if fd, ok := terminalFD(w); ok {
		if c, _, err := term.GetSize(fd); err == nil {
			columns = c
		}
	}
	w = termsafe.Writer(w) // names, paths and the calibration source come from files
	fmt.Fprintf(w, "input %s -> prefill %s, decode %s  [%s]\n", formatBytes(rep.InputBytes), formatBytes(rep.PrefillBytes), formatBytes(rep.DecodeBytes), rep.Device)
	writeGroupsFit(w, rep.Tensors, columns)
	if len(rep.Worst) > 0 {
		// The numbers first, the name last: a long name wraps at the end of its line, not
		// through the columns.
		fmt.Fprintln(w, "\nworst tensors:")
		for _, l := range worstLines(rep.Worst[:min(5, len(rep.Worst))], columns) {
			fmt.Fprintln(w, l)
		}
	}
	if c := rep.Calibration; c != nil {
		ws := "-"
		if c.WeightedSQNR != nil {
			ws = fmt.Sprintf("%.2f dB", float64(*c.WeightedSQNR))
		}
		// One fact per line, so that 80 columns never wrap through a word.
		fmt.Fprintf(w, "\ncalibration %s (%d tokens, %s)\n", termsafe.Line(c.File), c.Tokens, termsafe.Line(c.Source))
		fmt.Fprintf(w, "  method %s; modules by method: %s\n", c.Method, formatCounts(c.Modules))
		fmt.Fprintf(w, "  no statistics %d, no tokens %d, no Hessian %d\n", c.NoStats, c.NoTokens, c.NoHessian)
		fmt.Fprintf(w, "  activation-weighted SQNR %s\n", ws)
		for i, n := range c.Notes {
			if i == 5 {
				fmt.Fprintf(w, "  ... %d more notes in report.json\n", len(c.Notes)-5)
				break
			}
			fmt.Fprintf(w, "  %s\n", termsafe.Line(n))
		}
	}
	var wrote []string
	for _, kind := range []string{"prefill", "decode"} {
		if rep.Options.Only == "" || rep.Options.Only == kind {
			wrote = append(wrote, filepath.Join(out, kind))
		}
	}
	fmt.Fprintf(w, "\nwrote %s, %s\n", strings.Join(wrote, ", "), filepath.Join(out, "report.json"))
}
