package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdq/calib"
	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// planFlags are the flags shared by plan, convert and verify: they decide what the outputs are.
type planFlags struct {
	groupSize     int
	method        string
	signedScales  bool
	targets       string
	ignore        string
	decodeDense   string
	only          string
	maxShardSize  int64
	onUnsupported string
	calib         string
	calibMethod   string
	calibActOrder bool
	calibDamp     float64
	config        string
	noInt4OK      bool
	decodeFormat  string
	fl            *pflag.FlagSet // to tell a --group-size given from its default
}

func (f *planFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.fl = fl
	fl.StringVar(&f.decodeFormat, "decode-format", "int4", decodeFormatHelp())
	fl.IntVar(&f.groupSize, "group-size", 32, "INT4 group size along the input dimension: 32, 64, 128, or 0 for one scale per output channel"+fixedGroupsHelp())
	fl.StringVar(&f.method, "method", "mse", "scale method of the decode format: mse (search for the scale with the least squared error; INT4 then refines) or rtn (the compressed-tensors rule: INT4 absmax/7.5, FP4 as the library quantizes)")
	fl.BoolVar(&f.signedScales, "signed-scales", false, "EXPERIMENTAL: Q4_0-style signed scales (the extreme value lands on -8); untested in the engines' kernels")
	fl.StringVar(&f.targets, "targets", convert.DefaultTargets, "regex over module names: the Linear modules quantized to INT4 in the decode checkpoint")
	showRawDefault(fl, "targets")
	fl.StringVar(&f.ignore, "ignore", "", "regex over module names kept out of every quantization (they stay as in the source, FP8 sources as BF16 in decode)")
	fl.StringVar(&f.decodeDense, "decode-dense", "bf16", "non-target Linears in the decode checkpoint: bf16 (loads in vLLM and SGLang) or fp8 (compressed-tensors FP8 block group beside the INT4 group; vLLM; SGLang support unverified)")
	fl.StringVar(&f.only, "only", "", "write only one output: prefill or decode")
	f.maxShardSize = convert.DefaultMaxShardSize
	fl.Var(bytesValue{&f.maxShardSize}, "max-shard-size", "largest output shard, e.g. 5GB or 512MiB")
	fl.StringVar(&f.calib, "calib", "", "calibration statistics (safetensors, from tools/collect_calib.py; see docs/CALIBRATION.md): INT4 scales minimise the activation-weighted error")
	fl.StringVar(&f.calibMethod, "calib-method", "", "with --calib: weighted (default; scale search weighted by E[x²]) or gptq (GPTQ with static groups for modules with a Hessian)")
	fl.BoolVar(&f.calibActOrder, "calib-act-order", false, "gptq: process columns by decreasing E[x²] (static groups, no g_idx: only the order changes)")
	fl.Float64Var(&f.calibDamp, "calib-damp", 0, "gptq: dampening as a fraction of the mean Hessian diagonal (default 0.01; raised tenfold on Cholesky failure)")
	fl.StringVar(&f.config, "config", "", "the model's config.json, for a SRC without one (or to use instead of SRC's); the outputs get it with their quantization_config")
	fl.BoolVar(&f.noInt4OK, "decode-without-int4", false, "accept a decode checkpoint in which no module is in the --decode-format (INT4 by default; otherwise refused: nothing matches --targets)")
	fl.StringVar(&f.onUnsupported, "on-unsupported", "error", "a target that cannot be quantized (shape not divisible by the group): error, or skip (keep it dense and list it in the report)")
}

// fixedGroupsHelp says, for the help of --group-size, which decode formats fix their group size:
// " (a, b and c fix theirs: 16, 32, 128)", or "" when none does.
func fixedGroupsHelp() string {
	var names, sizes []string
	for _, f := range convert.Formats() {
		if f.FixedGroup > 0 {
			names = append(names, string(f.Format))
			sizes = append(sizes, strconv.Itoa(f.FixedGroup))
		}
	}
	if names == nil {
		return ""
	}
	return " (" + joinList(names, "and") + " fix theirs: " + strings.Join(sizes, ", ") + ")"
}

// decodeFormatHelp is the help of --decode-format: which GPUs and engines each format suits.
func decodeFormatHelp() string {
	var b strings.Builder
	b.WriteString("routed experts' format in the decode checkpoint: ")
	for i, d := range convert.Formats() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s; %s)", d.Format, d.Layout, d.GPUs)
	}
	b.WriteString(". pdq plan names the GPUs each engine loads it on; formats with fixed groups refuse a --group-size saying otherwise")
	return b.String()
}

// decodeFormatList is the list of decode formats in pdq convert --help, each line indented by
// indent spaces and wrapped at 98 columns.
func decodeFormatList(indent int) string {
	var b strings.Builder
	pad := strings.Repeat(" ", indent)
	for _, d := range convert.Formats() {
		text := d.Layout + "; " + d.GPUs
		if d.FixedGroup > 0 {
			text += fmt.Sprintf("; fixed groups of %d", d.FixedGroup)
		}
		words := strings.Fields(text)
		line := fmt.Sprintf("%s%-8s", pad, d.Format)
		for _, w := range words {
			if len(line)+1+len(w) > 98 {
				b.WriteString(line + "\n")
				line = pad + strings.Repeat(" ", 8)
			} else if !strings.HasSuffix(line, " ") {
				line += " "
			}
			line += w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// groupSizeGiven reports whether --group-size was given on the command line.
func (f *planFlags) groupSizeGiven() bool {
	return f.fl != nil && f.fl.Changed("group-size")
}

func (f *planFlags) options() convert.Options {
	group := groupOption(f.groupSize)
	if f.decodeFormat != "" && f.decodeFormat != string(convert.DecodeInt4) && !f.groupSizeGiven() {
		group = 0 // the format's own
	}
	return convert.Options{
		DecodeFormat: convert.DecodeFormat(f.decodeFormat),
		GroupSize:    group, Method: quantize.Method(f.method), SignedScales: f.signedScales,
		Targets: f.targets, Ignore: f.ignore, DecodeDense: convert.DenseForm(f.decodeDense), Only: convert.OutputKind(f.only),
		MaxShardSize: f.maxShardSize, OnUnsupported: convert.Unsupported(f.onUnsupported),
		CalibMethod: f.calibMethod, CalibActOrder: f.calibActOrder, CalibDamp: f.calibDamp,
		NoInt4OK: f.noInt4OK,
	}
}

// check refuses flag values the plan would refuse, in the flags' own terms.
func (f *planFlags) check() error {
	if strings.EqualFold(strings.TrimSpace(f.method), "gptq") {
		return usagef("--method gptq: GPTQ needs calibration statistics: give --calib FILE --calib-method gptq (--method picks the scale search, mse or rtn)")
	}
	if fixed := convert.DecodeFormat(f.decodeFormat).FixedGroup(); fixed != 0 {
		if f.groupSizeGiven() && f.groupSize != fixed {
			return usagef("--group-size %d: --decode-format %s has groups of %d: leave --group-size out (or give %d)", f.groupSize, f.decodeFormat, fixed, fixed)
		}
		return nil
	}
	if f.groupSize >= 0 && quantize.CheckGroupSize(f.groupSize) == nil { // 0 is per channel here
		return nil
	}
	return usagef("--group-size %d: want %s, or 0 for one scale per output channel", f.groupSize, orList(quantize.GroupSizes))
}

// showRawDefault moves a string flag's default into its usage text as typed on a command line:
// pflag quotes string defaults Go-style, which doubles every backslash of a regular expression.
func showRawDefault(fl *pflag.FlagSet, name string) {
	f := fl.Lookup(name)
	f.Usage += " (default " + f.DefValue + ")"
	f.DefValue = ""
}

// openPlan opens a source checkpoint and plans its conversion. Option errors are usage errors.
func openPlan(src string, f *planFlags) (*convert.Plan, *safetensors.Checkpoint, error) {
	if err := f.check(); err != nil {
		return nil, nil, err
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := rules.LoadConfig(ck.Dir)
	if err == nil && f.config != "" {
		cfg, err = rules.LoadConfigFile(f.config)
	}
	if err != nil {
		ck.Close()
		return nil, nil, err
	}
	if cfg == nil {
		ck.Close()
		return nil, nil, usagef("%s has no config.json, and vLLM and SGLang need one beside the weights to load the outputs: give the model's with --config FILE", src)
	}
	o := f.options()
	if f.calib != "" {
		// The statistics file stays open for the life of the command.
		if o.Calib, err = calib.Open(f.calib); err != nil {
			ck.Close()
			return nil, nil, err
		}
	}
	p, err := convert.NewPlan(ck, cfg, o)
	if err == nil && f.config != "" {
		err = p.UseConfigFile(f.config)
	}
	if err != nil {
		ck.Close()
		if o.Calib != nil {
			o.Calib.Close()
		}
		if isBadOptions(err) || errors.Is(err, convert.ErrNoTargets) {
			return nil, nil, usageError{err}
		}
		return nil, nil, err
	}
	logPlan(p)
	return p, ck, nil
}

// logPlan logs the plan's decisions (with -v): the layout found, the options, and the modules
// of each output by role and scheme.
func logPlan(p *convert.Plan) {
	if !slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	o := p.Options
	slog.Debug("plan", "source", p.Source.Dir, "layout", p.Layout.String(), "shards", len(p.Source.Shards), "modules", len(p.Modules),
		"group_size", o.GroupSize, "method", o.Method, "targets", o.Targets, "ignore", o.Ignore, "decode_dense", o.DecodeDense)
	for _, out := range p.Outputs {
		counts := p.Counts(out.Kind)
		roles := make([]string, 0, len(counts))
		for _, r := range rules.Roles {
			if c := counts[string(r)]; c != nil {
				roles = append(roles, string(r)+": "+formatCounts(c))
			}
		}
		slog.Debug("plan output", "output", out.Kind, "shards", len(out.Shards), "bytes", out.Bytes(p.Source),
			"copies_source", out.CopySource, "modules", strings.Join(roles, "; "))
	}
	for _, s := range p.Skipped {
		slog.Debug("plan: kept dense", "module", s)
	}
}

// groupOption maps the --group-size flag (0 = per channel) to convert.Options.GroupSize.
func groupOption(g int) int {
	if g == 0 {
		return convert.PerChannel
	}
	return g
}

// orList writes ns as a person would: "32, 64 or 128".
func orList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
