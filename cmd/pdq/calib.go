package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/spf13/cobra"

	"pdq/calib"
	"pdq/internal/termsafe"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

func init() { commands = append(commands, newCalibCmd) }

func newCalibCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "calib",
		Short: "Work with calibration statistics (see docs/CALIBRATION.md)",
		Example: `  python tools/collect_calib.py --model /models/GLM-5 --out stats.safetensors   # collect
  pdq calib inspect stats.safetensors --against /models/GLM-5                   # check coverage
  pdq convert /models/GLM-5 --out /data/glm5-pd --calib stats.safetensors        # use them`,
	}
	var o calibInspectOptions
	inspect := &cobra.Command{
		Use:   "inspect STATS [--against SRC]",
		Short: "Summarise a calibration statistics file and check it against a checkpoint",
		Long: `Inspect reads a statistics file written by tools/collect_calib.py and prints its source, the
tokens per module (experts that saw no tokens are counted), the spread of E[x²] across input
channels and which modules carry a Hessian. With --against SRC it plans the INT4 targets of SRC
and reports which are covered (directly or through the gate/up sibling), which have no entry or
no tokens (quantized without weights), and which entries do not fit their module's shape: pdq
convert --calib refuses those.`,
		Example: `  pdq calib inspect stats.safetensors
  pdq calib inspect stats.safetensors --against /models/GLM-5 --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCalibInspect(cmd.OutOrStdout(), args[0], o)
		},
	}
	fl := inspect.Flags()
	fl.StringVar(&o.against, "against", "", "checkpoint whose INT4 targets the statistics should cover")
	fl.StringVar(&o.targets, "targets", convert.DefaultTargets, "with --against: regex over module names selecting the INT4 targets")
	showRawDefault(fl, "targets")
	fl.BoolVar(&o.asJSON, "json", false, "print JSON")
	cmd.AddCommand(inspect)
	return cmd
}

type calibInspectOptions struct {
	against, targets string
	asJSON           bool
}

// calibSummary is what calib inspect reports.
type calibSummary struct {
	File        string            `json:"file"`
	SHA256      string            `json:"sha256"`
	Tokens      int64             `json:"tokens"`
	Source      string            `json:"source"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Entries     int               `json:"entries"`
	WithHessian int               `json:"with_hessian"`
	WithAbsMean int               `json:"with_abs_mean"`
	// Per-module tokens (entries with a count): quantiles and how many saw none.
	TokenMin, TokenMedian, TokenMax int64   `json:"-"`
	TokenQuantiles                  []int64 `json:"token_quantiles,omitempty"` // min, 10%, median, 90%, max
	ZeroTokens                      int     `json:"zero_tokens"`
	UnknownTokens                   int     `json:"unknown_tokens"`
	// Channel spread: standard deviation of ln E[x²] over live channels, per entry.
	SpreadQuantiles []float64 `json:"spread_ln_quantiles,omitempty"` // min, 10%, median, 90%, max
	DeadChannels    int64     `json:"dead_channels"`                 // E[x²] == 0 in entries that saw tokens
	Against         *coverage `json:"against,omitempty"`
}

// coverage is the check of a statistics file against a checkpoint's INT4 targets.
type coverage struct {
	Source     string   `json:"source"`
	Targets    int      `json:"targets"`
	Direct     int      `json:"direct"`
	Shared     int      `json:"shared"`     // covered through the gate/up sibling
	Missing    []string `json:"missing"`    // no entry: unweighted
	NoTokens   []string `json:"no_tokens"`  // entry saw no tokens: unweighted
	Mismatched []string `json:"mismatched"` // refused by convert
	Unused     int      `json:"unused"`     // entries matching no target
}

func runCalibInspect(w io.Writer, path string, o calibInspectOptions) error {
	st, err := calib.Open(path)
	if err != nil {
		return err
	}
	defer st.Close()
	sum := &calibSummary{File: path, SHA256: st.ID, Tokens: st.Tokens, Source: st.Source, Metadata: st.Metadata}
	var toks []int64
	var spreads []float64
	zero := map[string]bool{}
	for _, name := range st.Modules() {
		e := st.Lookup(name)
		sum.Entries++
		if e.Hessian != nil {
			sum.WithHessian++
		}
		if e.AbsMean != nil {
			sum.WithAbsMean++
		}
		n, err := st.EntryTokens(e)
		if err != nil {
			return err
		}
		d, err := st.SqMean(e)
		if err != nil {
			return err
		}
		if n < 0 {
			sum.UnknownTokens++
		} else {
			toks = append(toks, n)
		}
		if n == 0 || calib.Unobserved(d) {
			sum.ZeroTokens++
			zero[name] = true
			continue
		}
		var s, s2 float64
		var live int
		for _, v := range d {
			if v == 0 {
				sum.DeadChannels++
				continue
			}
			l := math.Log(float64(v))
			s, s2 = s+l, s2+l*l
			live++
		}
		if live > 0 {
			m := s / float64(live)
			spreads = append(spreads, math.Sqrt(math.Max(0, s2/float64(live)-m*m)))
		}
	}
	sum.TokenQuantiles = quantilesInt(toks)
	sum.SpreadQuantiles = quantilesFloat(spreads)
	if o.against != "" {
		if sum.Against, err = checkCoverage(st, o, zero); err != nil {
			return err
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(termsafe.JSONWriter(w))
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	printCalibSummary(w, sum)
	if c := sum.Against; c != nil && len(c.Mismatched) > 0 {
		return fmt.Errorf("calib: %d module(s) of %s do not match their statistics (pdq convert --calib refuses them)", len(c.Mismatched), c.Source)
	}
	return nil
}

// checkCoverage plans src's INT4 targets and looks each up in the statistics.
func checkCoverage(st *calib.Stats, o calibInspectOptions, zero map[string]bool) (*coverage, error) {
	ck, err := safetensors.Open(o.against)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	cfg, err := rules.LoadConfig(ck.Dir)
	if err != nil {
		return nil, err
	}
	p, err := convert.NewPlan(ck, cfg, convert.Options{Targets: o.targets, Only: "decode", OnUnsupported: "skip"})
	if err != nil {
		return nil, err
	}
	c := &coverage{Source: o.against, Missing: []string{}, NoTokens: []string{}, Mismatched: []string{}}
	used := map[string]bool{}
	for _, m := range p.Modules {
		if m.Scheme(convert.KindDecode) != convert.SchemeInt4 {
			continue
		}
		c.Targets++
		e := st.Lookup(m.Name)
		switch {
		case e == nil:
			c.Missing = append(c.Missing, m.Name)
			continue
		case e.CheckShape(m.Name, m.Cols) != nil:
			c.Mismatched = append(c.Mismatched, fmt.Sprintf("%s: statistics %s have %d channels, weight %d", m.Name, e.Module, e.K, m.Cols))
		case zero[e.Module]:
			c.NoTokens = append(c.NoTokens, m.Name)
		case e.Module == m.Name:
			c.Direct++
		default:
			c.Shared++
		}
		if !used[e.Module] {
			// What convert reads of the entry, checked as convert checks it: E[x²] finite and
			// non-negative; a Hessian finite, symmetric, with a non-negative diagonal.
			if err := checkEntry(st, e); err != nil {
				c.Mismatched = append(c.Mismatched, fmt.Sprintf("%s: %v", m.Name, err))
			}
		}
		used[e.Module] = true
	}
	for _, n := range st.Modules() {
		if !used[n] {
			c.Unused++
		}
	}
	return c, nil
}

// checkEntry reads the statistics of e that convert reads and returns what it would refuse.
func checkEntry(st *calib.Stats, e *calib.Entry) error {
	if _, err := st.SqMean(e); err != nil {
		return err
	}
	if e.Hessian != nil {
		if _, err := st.Hessian(e); err != nil {
			return err
		}
	}
	return nil
}

func quantilesInt(v []int64) []int64 {
	if len(v) == 0 {
		return nil
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	var q []int64
	for _, f := range []float64{0, 0.1, 0.5, 0.9, 1} {
		q = append(q, v[int(f*float64(len(v)-1))])
	}
	return q
}

func quantilesFloat(v []float64) []float64 {
	if len(v) == 0 {
		return nil
	}
	sort.Float64s(v)
	var q []float64
	for _, f := range []float64{0, 0.1, 0.5, 0.9, 1} {
		q = append(q, v[int(f*float64(len(v)-1))])
	}
	return q
}

func printCalibSummary(w io.Writer, s *calibSummary) {
	w = termsafe.Writer(w) // the file's source and module names are the file's own text
	fmt.Fprintf(w, "%s  sha256 %s\n", s.File, s.SHA256[:16])
	fmt.Fprintf(w, "source: %s\ntokens: %d\n", termsafe.Line(s.Source), s.Tokens)
	fmt.Fprintf(w, "entries: %d (%d with Hessian, %d with E[|x|])\n", s.Entries, s.WithHessian, s.WithAbsMean)
	if q := s.TokenQuantiles; q != nil {
		fmt.Fprintf(w, "tokens per module: min %d, 10%% %d, median %d, 90%% %d, max %d\n", q[0], q[1], q[2], q[3], q[4])
	}
	fmt.Fprintf(w, "modules that saw no tokens: %d (quantized without weights)\n", s.ZeroTokens)
	if s.UnknownTokens > 0 {
		fmt.Fprintf(w, "modules without a token count: %d\n", s.UnknownTokens)
	}
	if q := s.SpreadQuantiles; q != nil {
		fmt.Fprintf(w, "channel spread, std of ln E[x²]: min %.2f, 10%% %.2f, median %.2f, 90%% %.2f, max %.2f\n", q[0], q[1], q[2], q[3], q[4])
	}
	fmt.Fprintf(w, "dead channels (E[x²] = 0): %d\n", s.DeadChannels)
	c := s.Against
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nagainst %s: %d INT4 targets: %d covered directly, %d through the gate/up sibling, %d without an entry, %d with no tokens, %d mismatched; %d entries unused\n",
		c.Source, c.Targets, c.Direct, c.Shared, len(c.Missing), len(c.NoTokens), len(c.Mismatched), c.Unused)
	for _, l := range []struct {
		what  string
		names []string
	}{{"mismatched", c.Mismatched}, {"no entry", c.Missing}, {"no tokens", c.NoTokens}} {
		for i, n := range l.names {
			if i == 5 {
				fmt.Fprintf(w, "  %s: ... and %d more (--json lists all)\n", l.what, len(l.names)-5)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", l.what, termsafe.Line(n))
		}
	}
}
