package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/quantize/rules"
	"pdq/serving"
)

func init() { commands = append(commands, newPlanCmd) }

func newPlanCmd() *cobra.Command {
	var f planFlags
	var sf serveFlags
	var asJSON bool
	var parts int
	cmd := &cobra.Command{
		Use:   "plan SRC",
		Short: "Show what convert would do and the exact size of each output, from headers only",
		Long: `Plan reads the headers and config.json of SRC and decides, for every module, what the prefill
(FP8 block) and decode (INT4 routed experts) checkpoints get, then lays out every output shard. The
sizes it prints are the exact sizes convert writes. It reads no tensor data: well under a second for
a 700 GiB checkpoint.`,
		Example: `  pdq plan /models/GLM-5-FP8
  pdq plan /models/GLM-5-FP8 --group-size 128 --json | jq .decode_bytes
  pdq plan /models/GLM-5-FP8 --parts 8        # what each of 8 machines converts (convert --part)
  pdq plan /models/GLM-5-FP8 --gpus 8 --gpu-memory 141GiB --kv-cache-dtype fp8_e4m3
  pdq plan /models/GLM-5-FP8 --gpu-memory 141GiB --serve sglang --out /data/g5
  pdq plan /models/GLM-5-FP8 --gpu-memory 141GiB --dp 8 --kv-cache-dtype fp8_e4m3   # DP attention`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], &f, &sf, asJSON, parts)
		},
	}
	f.add(cmd)
	sf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON document")
	cmd.Flags().IntVar(&parts, "parts", 0, "also show what each of N parts of a split conversion writes (pdq convert --part I/N)")
	return cmd
}

// planSummary is the JSON document of pdq plan.
type planSummary struct {
	Source        string                    `json:"source"`
	Layout        rules.Detected            `json:"source_layout"`
	InputBytes    int64                     `json:"input_bytes"`
	PrefillBytes  int64                     `json:"prefill_bytes"`
	DecodeBytes   int64                     `json:"decode_bytes"`
	PrefillShards int                       `json:"prefill_shards"`
	DecodeShards  int                       `json:"decode_shards"`
	PrefillCopy   bool                      `json:"prefill_is_source_copy"`
	Prefill       map[string]map[string]int `json:"prefill_modules"`
	Decode        map[string]map[string]int `json:"decode_modules"`
	Skipped       []string                  `json:"skipped,omitempty"`
	Warnings      []string                  `json:"warnings,omitempty"`
	Parts         []partSummary             `json:"parts,omitempty"`
	// DecodeGPUs says, per engine and GPU generation, whether the decode checkpoint's routed
	// experts load and through which kernel (the format × engine × GPU table).
	DecodeGPUs []engines.Support `json:"decode_gpus,omitempty"`
	Serving    *servingSummary   `json:"serving,omitempty"`
}

func summarizePlan(p *convert.Plan) planSummary {
	s := planSummary{Source: p.Source.Dir, Layout: p.Layout, InputBytes: p.InputBytes(), Skipped: p.Skipped, Warnings: p.Warnings}
	if pre := p.Output(convert.KindPrefill); pre != nil {
		s.PrefillBytes, s.PrefillShards, s.PrefillCopy = pre.Bytes(p.Source), len(pre.Shards), pre.CopySource
		if s.PrefillCopy {
			s.PrefillShards = len(p.Source.Shards)
		}
		s.Prefill = p.Counts("prefill")
	}
	if dec := p.Output(convert.KindDecode); dec != nil {
		s.DecodeBytes, s.DecodeShards = dec.Bytes(p.Source), len(dec.Shards)
		s.Decode = p.Counts("decode")
		s.DecodeGPUs = serving.FormatGPUs(p.Options.DecodeFormat)
	}
	return s
}

func runPlan(ctx context.Context, w, errw io.Writer, src string, f *planFlags, sf *serveFlags, asJSON bool, parts int) error {
	if parts < 0 {
		return usagef("plan: --parts %d: want a number of parts, at least 1", parts)
	}
	if err := sf.checkOff(); err != nil {
		return err
	}
	p, ck, err := openPlan(src, f)
	if err != nil {
		return err
	}
	defer ck.Close()
	s := summarizePlan(p)
	if parts > 0 {
		if s.Parts, err = summarizeParts(p, parts); err != nil {
			if errors.Is(err, convert.ErrBadPart) {
				return usageError{err} // more parts than files
			}
			return err
		}
	}
	if sf.enabled() {
		if s.Serving, err = sf.plan(p); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return err
		}
		return sf.check(s.Serving)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "source\t%s (%s)\t%s\n", s.Source, s.Layout, formatBytes(s.InputBytes))
	if p.Output(convert.KindPrefill) != nil {
		how := "FP8 blocks"
		if s.PrefillCopy {
			how = "the FP8 source unchanged"
		}
		fmt.Fprintf(tw, "prefill/\t%d shard(s), %s\t%s (%.1f%% of input)\n", s.PrefillShards, how, formatBytes(s.PrefillBytes), pct(s.PrefillBytes, s.InputBytes))
	}
	if p.Output(convert.KindDecode) != nil {
		group := fmt.Sprintf("g%d", p.Options.GroupSize)
		if p.Options.GroupSize == convert.PerChannel {
			group = "per-channel"
		}
		format := strings.ToUpper(string(p.Options.DecodeFormat))
		if format == "" {
			format = "INT4"
		}
		experts := fmt.Sprintf("%s %s %s experts", format, group, f.method)
		var passed, encoded int
		for _, m := range p.Modules {
			switch m.Scheme(convert.KindDecode) {
			case convert.SchemePassed:
				passed++
			case p.TargetScheme():
				encoded++
			}
		}
		switch {
		case passed > 0 && encoded == 0:
			experts = fmt.Sprintf("%s %s experts passed through from the source", format, group)
		case passed > 0:
			experts += fmt.Sprintf(" (%d modules passed through from the source)", passed)
		}
		fmt.Fprintf(tw, "decode/\t%d shard(s), %s, rest %s\t%s (%.1f%% of input)\n", s.DecodeShards, experts, f.decodeDense, formatBytes(s.DecodeBytes), pct(s.DecodeBytes, s.InputBytes))
	}
	tw.Flush()
	if s.PrefillCopy {
		fmt.Fprintln(w, "(with DIR on the XFS (reflinks on) or btrfs that holds SRC, prefill/ is cloned: no writes, no space)")
	}
	for _, kind := range []struct {
		name   string
		counts map[string]map[string]int
	}{{"prefill", s.Prefill}, {"decode", s.Decode}} {
		if kind.counts == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s modules by role and scheme:\n", kind.name)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, role := range rules.Roles {
			c := kind.counts[string(role)]
			if c == nil {
				continue
			}
			fmt.Fprintf(tw, "  %s\t", role)
			for _, scheme := range sortedKeys(c) {
				fmt.Fprintf(tw, "%s %d  ", scheme, c[scheme])
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	printDecodeGPUs(w, s.DecodeGPUs)
	writeNotes(errw, s.Skipped, s.Warnings)
	if s.Parts != nil {
		printParts(w, s.Parts)
	}
	if s.Serving != nil {
		s.Serving.print(w)
	}
	return sf.check(s.Serving)
}

func isBadOptions(err error) bool { return errors.Is(err, convert.ErrBadOptions) }

// printDecodeGPUs writes on which GPU generations each engine loads the decode checkpoint's
// routed experts: one line per engine, then, once per engine and text, why a generation does not
// load them and what to know where they do.
func printDecodeGPUs(w io.Writer, cells []engines.Support) {
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(w, "\ndecode experts (%s) load on (docs/SERVING.md, \"Decode formats and GPUs\"):\n", cells[0].Format)
	type note struct {
		e    engines.Engine
		text string
	}
	var order []note
	where := map[note][]string{}
	for _, e := range engines.Engines {
		var parts []string
		for _, c := range cells {
			if c.Engine != e {
				continue
			}
			g, _ := engines.ParseGPU(fmt.Sprint(c.MinSM))
			verdict, text := "yes", c.Note
			if !c.Loads {
				verdict, text = "NO", c.Path
			}
			parts = append(parts, fmt.Sprintf("%s %s", g, verdict))
			if text != "" {
				n := note{e, text}
				if where[n] == nil {
					order = append(order, n)
				}
				where[n] = append(where[n], g.Name)
			}
		}
		if parts != nil {
			fmt.Fprintf(w, "  %-7s %s\n", e, strings.Join(parts, ", "))
		}
	}
	for _, n := range order {
		fmt.Fprintf(w, "  %s on %s: %s\n", n.e, strings.Join(where[n], ", "), n.text)
	}
}
