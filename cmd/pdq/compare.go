package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"pdq/internal/fsutil"
	"pdq/quantize"
	"pdq/quantize/compare"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/reportview"
	"pdq/safetensors"
	"pdq/serving"
)

func init() { commands = append(commands, newCompareCmd) }

// compareOptions are the flags of pdq compare.
type compareOptions struct {
	formats       string
	method        string
	layers        string
	sample        int
	workers       int
	targets       string
	ignore        string
	decodeDense   string
	config        string
	asJSON, asCSV bool
	plot          string
	quiet         bool
}

func newCompareCmd() *cobra.Command {
	var o compareOptions
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "compare SRC",
		Short: "Measure " + joinList(append([]string{"INT4"}, compareTitles()...), "and") + " decode formats side by side on the same tensors, with the room each leaves a decode server",
		Long: `Compare answers "which decode format for my decode pool": it reads SRC once, quantizes each routed-expert
weight (the modules pdq convert makes INT4, see --targets) with every format of --formats in memory,
and prints one row per format: bits per weight (scales included), the mean SQNR over the measured
modules (each module's SQNR in dB, the statistic of pdq report) overall and per projection (gate,
up, down), the lowest, the worst layer and projection, the bytes of the target modules in that
format (targets) and of the whole decode checkpoint (decode/). With --gpu-memory it adds what pdq
plan computes for a decode server holding that checkpoint: weights per GPU, the KV cache left per
GPU and the tokens of context one server holds. Nothing is written but the table (and --plot).

` + wrapText(`The figures are pdq convert's: the same decoded values, quantizers, slabs and error sums, so an
INT4 figure equals what convert --group-size G reports for the tensor, an `+joinList(compareTitles(), "or")+` one what
convert --decode-format reports. `+compareNotes()+` Memory is one slab (16 MiB of float32) per worker.`, 98) + `

` + wrapText(`Formats: int4-g32 (convert's default), int4-g64, int4-g128, int4-channel, `+compareFormatDocs()+`. docs/FP4.md describes the FP4 layouts and their rules.`, 97) + `

--sample N measures N experts per layer (spread over the expert indices) and --layers a subset of
layers: the bytes and serving columns always count the whole model.`,
		Example: `  pdq compare /models/GLM-5-FP8 --sample 8                  # 8 experts per layer, 4 formats
  pdq compare /models/Kimi-K2 --layers 1-4 --method rtn      # compressed-tensors' own rule
  pdq compare /models/GLM-5-FP8 --sample 4 --gpu-memory 141GiB --tp 8 --kv-cache-dtype fp8_e4m3
  pdq compare /models/GLM-5-FP8 --formats int4-g32,` + string(exampleFormat().Format) + ` --plot sqnr.svg --csv > cells.csv`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompare(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], &o, &sf)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.formats, "formats", compare.DefaultFormats, "comma-separated formats to measure: "+compare.Names())
	fl.StringVar(&o.method, "method", "mse", "scale method of every format: mse (search for the least squared error, convert's default) or rtn (the compressed-tensors rule)")
	fl.StringVar(&o.layers, "layers", "", "measure only these layers: numbers and ranges, e.g. 3,10-12 (default all)")
	fl.IntVar(&o.sample, "sample", 0, "measure this many routed experts per layer, spread over the expert indices (default all)")
	fl.IntVar(&o.workers, "workers", 0, "modules measured at once (default: the CPUs); the figures do not depend on it")
	fl.StringVar(&o.targets, "targets", convert.DefaultTargets, "regex over module names: the Linear modules the decode checkpoint quantizes (convert's --targets)")
	showRawDefault(fl, "targets")
	fl.StringVar(&o.ignore, "ignore", "", "regex over module names kept out of quantization (convert's --ignore)")
	fl.StringVar(&o.decodeDense, "decode-dense", "bf16", "non-target Linears in the decode checkpoint, for its size: bf16 or fp8 (convert's --decode-dense)")
	fl.StringVar(&o.config, "config", "", "the model's config.json, for a SRC without one (or to use instead of SRC's)")
	fl.BoolVar(&o.asJSON, "json", false, "print a JSON document: every format's figures per projection, layer and layer and projection")
	fl.BoolVar(&o.asCSV, "csv", false, "print CSV: one line per format and group (all, each projection, each layer, each layer and projection)")
	fl.StringVar(&o.plot, "plot", "", "draw SQNR per layer, one line per format, into this .png or .svg file")
	fl.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar")
	sf.add(cmd)
	// Launch commands are pdq plan's: compare refuses these two (check), and its help does not
	// offer them.
	for _, name := range []string{"serve", "out"} {
		fl.MarkHidden(name)
	}
	return cmd
}

// check refuses flag values before anything is read.
func (o *compareOptions) check(cmd *cobra.Command) (copt compare.Options, err error) {
	if o.asJSON && o.asCSV {
		return copt, usagef("compare: --json and --csv exclude each other")
	}
	if copt.Formats, err = compare.ParseFormats(o.formats); err != nil {
		return copt, usagef("compare: --formats: %v", err)
	}
	copt.Method = quantize.Method(strings.ToLower(strings.TrimSpace(o.method)))
	if copt.Method.Check() != nil {
		return copt, usagef("compare: --method %q: want mse or rtn", o.method)
	}
	if o.sample < 0 {
		return copt, usagef("compare: --sample %d: want a number of experts per layer, at least 1 (0: all)", o.sample)
	}
	copt.Sample, copt.Workers = o.sample, o.workers
	if o.workers < 0 {
		return copt, usagef("compare: --workers %d: want at least 1 (0: the CPUs)", o.workers)
	}
	if o.layers != "" {
		if copt.Layers, err = parseLayers(o.layers); err != nil {
			return copt, usagef("compare: --layers %q: %v", o.layers, err)
		}
	}
	if o.decodeDense != "bf16" && o.decodeDense != "fp8" {
		return copt, usagef("compare: --decode-dense %q: want bf16 or fp8", o.decodeDense)
	}
	if o.plot != "" {
		if _, err := plotFormat(o.plot); err != nil {
			return copt, usagef("compare: --plot: %v", err)
		}
		if err := checkWritable(o.plot); err != nil {
			return copt, usagef("compare: --plot %s: %v", o.plot, err)
		}
	}
	for _, name := range []string{"serve", "out"} {
		if cmd.Flags().Changed(name) {
			return copt, usagef("compare: --%s prints launch commands: run pdq plan SRC --serve ENGINE for those (compare takes --gpu-memory and the other serving-plan flags)", name)
		}
	}
	if cmd.Flags().Lookup("gpu-memory").Changed {
		return copt, nil
	}
	for _, name := range []string{"kv-cache-dtype", "gpus", "tp", "ep", "dp", "dp-lm-head", "mem-fraction", "reserve", "seq-len"} {
		if cmd.Flags().Changed(name) {
			return copt, usagef("compare: --%s is a serving-plan flag: give --gpu-memory (the memory of one GPU, e.g. 141GiB) for the serving columns", name)
		}
	}
	return copt, nil
}

// parseLayers reads "3,10-12" into a set of layer numbers.
func parseLayers(s string) (map[int]bool, error) {
	out := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		switch {
		case err != nil || a < 0:
			return nil, fmt.Errorf("%q is not a layer number or a range like 10-12", part)
		case b < a:
			return nil, fmt.Errorf("range %q runs backwards", part)
		case b-a > 1<<16:
			return nil, fmt.Errorf("range %q is larger than any model", part)
		}
		for l := a; l <= b; l++ {
			out[l] = true
		}
	}
	return out, nil
}

func runCompare(ctx context.Context, w, errw io.Writer, src string, o *compareOptions, sf *serveFlags) error {
	copt, err := o.check(sf.cmd)
	if err != nil {
		return err
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	cfg, err := rules.LoadConfig(ck.Dir)
	if err == nil && o.config != "" {
		cfg, err = rules.LoadConfigFile(o.config)
	}
	if err != nil {
		return err
	}
	// The plan's own group size does not matter: compare replaces the targets' tensors with
	// each format's. Per channel refuses the fewest shapes; what a format cannot take is
	// refused by compare.Run, naming the format.
	p, err := convert.NewPlan(ck, cfg, convert.Options{
		GroupSize: convert.PerChannel, Targets: o.targets, Ignore: o.ignore, DecodeDense: convert.DenseForm(o.decodeDense),
		Only: convert.KindDecode, OnUnsupported: convert.UnsupportedSkip,
	})
	if err != nil {
		if isBadOptions(err) {
			return usageError{err}
		}
		return err
	}
	var setup *compare.Setup
	var serveText string
	if sf.enabled() {
		if p.Config == nil {
			return usagef("compare: %s has no config.json, which the serving columns need: give the model's with --config FILE", src)
		}
		if setup, serveText, err = compareSetup(sf, p); err != nil {
			return err
		}
	}
	if !o.quiet && !o.asJSON && !o.asCSV {
		if fd, ok := terminalFD(errw); ok {
			bar := newProgressBar(errw, fd, "compare")
			copt.Progress = bar.Update
			activeBar.Store(bar)
			defer activeBar.Store(nil)
			defer bar.Stop()
		}
	}
	res, err := compare.Run(ctx, p, copt)
	if err != nil {
		if errors.Is(err, compare.ErrNoModules) {
			return usageError{err}
		}
		return err
	}
	sums := res.Summaries()
	if err := compare.Sizes(p, sums, copt.Formats, setup); err != nil {
		return err
	}
	rep := compare.NewReport(src, res, sums)
	rep.Serving = serveText
	if bar := activeBar.Load(); bar != nil {
		bar.Stop()
	}
	if o.plot != "" {
		format, _ := plotFormat(o.plot)
		err := fsutil.WriteAtomic(o.plot, func(fw io.Writer) error { return reportview.WriteLines(fw, rep.Chart(), format) })
		if err != nil {
			return fmt.Errorf("compare: --plot %s: %w", o.plot, err)
		}
	}
	switch {
	case o.asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case o.asCSV:
		return rep.WriteCSV(w)
	}
	writeNotes(errw, p.Skipped, nil)
	if err := rep.WriteTable(w); err != nil {
		return err
	}
	if o.plot != "" {
		fmt.Fprintf(w, "wrote %s\n", o.plot)
	}
	return nil
}

// compareSetup is the decode server of pdq plan's serving flags, as plan computes it.
func compareSetup(sf *serveFlags, p *convert.Plan) (*compare.Setup, string, error) {
	s, err := sf.plan(p)
	if err != nil {
		return nil, "", err
	}
	if s.Decode == nil {
		return nil, "", fmt.Errorf("compare: the plan has no decode output")
	}
	m, err := serving.ModelFromConfig(p.Config)
	if err != nil {
		return nil, "", err
	}
	d := s.Decode
	setup := &compare.Setup{
		Model:    m,
		Parallel: serving.Parallel{TP: s.TP, EP: s.EP, DP: s.DP, DPLMHead: s.DPLMHead, Engine: s.Engine},
		Budget:   serving.Budget{GPUMemory: s.GPUMemory, MemFraction: d.MemFraction, Reserve: d.Reserve},
		KV:       d.KV, SeqLen: d.SeqLen,
	}
	dp := ""
	if s.DP > 1 {
		dp = fmt.Sprintf(" DP%d", s.DP)
	}
	text := fmt.Sprintf("%s rules, TP%d EP%d%s, %s per GPU, memory fraction %.3f, reserve %s (assumed), KV cache %s, %d B per token per GPU",
		s.Engine, s.TP, s.EP, dp, formatBytes(s.GPUMemory), d.MemFraction, formatBytes(d.Reserve), s.KVDType, d.KV.PerToken)
	return setup, text, nil
}

// compareTitles are the titles of the decode formats compare measures beside INT4's groups.
func compareTitles() []string {
	var out []string
	for _, f := range compare.Formats {
		if f.Kind == compare.KindDecode {
			info, _ := convert.FormatOf(f.Decode)
			out = append(out, info.Title)
		}
	}
	return out
}

// compareNotes are the sentences the measured formats add about how they are measured.
func compareNotes() string {
	var out []string
	for _, f := range compare.Formats {
		if f.Kind == compare.KindDecode && f.Info.Note != "" {
			out = append(out, f.Info.Note)
		}
	}
	return strings.Join(out, " ")
}

// compareFormatDocs lists the decode formats compare measures beside INT4's groups, each with
// its description: "name (doc), name (doc)".
func compareFormatDocs() string {
	var out []string
	for _, f := range compare.Formats {
		if f.Kind == compare.KindDecode {
			out = append(out, f.Name+" ("+f.Info.Doc+")")
		}
	}
	return strings.Join(out, ", ")
}
