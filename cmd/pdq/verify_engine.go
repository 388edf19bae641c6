package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"pdq/quantize/engines"
)

// parseEngines reads --engine: "sglang", "vllm", a comma list, or "all".
func parseEngines(s string) ([]engines.Engine, error) {
	if s == "all" {
		return engines.Engines, nil
	}
	var out []engines.Engine
	for _, f := range strings.Split(s, ",") {
		e := engines.Engine(strings.TrimSpace(f))
		if e != engines.SGLang && e != engines.VLLM {
			return nil, usagef("verify: --engine %q: want sglang, vllm or all", f)
		}
		out = append(out, e)
	}
	return out, nil
}

// engineDirs are the checkpoints of dir: its decode/ and prefill/ when it is a conversion's
// output directory, else dir itself.
func engineDirs(dir string) []string {
	if !isConvertOutput(dir) {
		return []string{dir}
	}
	var out []string
	for _, kind := range []string{"prefill", "decode"} {
		if d := filepath.Join(dir, kind); isDir(d) {
			out = append(out, d)
		}
	}
	return out
}

// engineReport is one engine's verdict on one checkpoint.
type engineReport struct {
	Dir string `json:"dir"`
	*engines.Result
	RequiredFlags []string `json:"required_flags"`
	// GPUs is the format × engine × GPU table's row for the routed experts' format, one cell
	// per generation (only the given GPU's with --gpu).
	GPUs []engines.Support `json:"gpus,omitempty"`
}

// checkEngines applies the engines' rules to each checkpoint of dir. The launch flags a
// checkpoint needs are listed, not counted as problems.
func checkEngines(dir string, es []engines.Engine, tp, sm int) ([]engineReport, error) {
	var out []engineReport
	for _, d := range engineDirs(dir) {
		in, err := engines.Load(d)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			r := engines.Check(e, in, engines.Options{TP: tp, SM: sm})
			flags := r.RequiredFlags()
			r = engines.Check(e, in, engines.Options{TP: tp, SM: sm, Flags: flags})
			rep := engineReport{Dir: d, Result: r, RequiredFlags: append([]string{}, flags...)}
			for _, s := range engines.SupportTable(r.ExpertFormat) {
				if s.Engine == e && (sm == 0 || s.MinSM == sm) {
					rep.GPUs = append(rep.GPUs, s)
				}
			}
			out = append(out, rep)
		}
	}
	return out, nil
}

// runVerifyEngine is pdq verify --engine E [--tp N] DIR.
func runVerifyEngine(w io.Writer, dir string, o verifyOptions) error {
	es, err := parseEngines(o.engine)
	if err != nil {
		return err
	}
	if o.tp < 0 {
		return usagef("verify: --tp %d: want a tensor-parallel size of 1 or more", o.tp)
	}
	sm := 0
	if o.gpu != "" {
		g, err := engines.ParseGPU(o.gpu)
		if err != nil {
			return usagef("verify: --gpu %q: want a100, h100, h200, b200, gb200, or sm80, sm90, sm100 (the generations pdq has the engines' rules for)", o.gpu)
		}
		sm = g.SM
	}
	reps, err := checkEngines(dir, es, o.tp, sm)
	if err != nil {
		return err
	}
	problems := 0
	for _, r := range reps {
		problems += len(r.Problems)
	}
	if o.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"tool": "pdq verify --engine", "ok": problems == 0, "checks": reps}); err != nil {
			return err
		}
	} else {
		for _, r := range reps {
			verdict := "loads as written"
			if !r.OK() {
				verdict = fmt.Sprintf("%d problem(s)", len(r.Problems))
			}
			fmt.Fprintf(w, "%s %s (%s, %d modules): %s\n", r.Engine, r.Dir, r.Kind, r.Modules, verdict)
			for _, f := range r.Flags {
				fmt.Fprintf(w, "  needs %s: %s [%s]\n", f.Flag, f.Problem, f.Source)
			}
			printGPUs(w, r.ExpertFormat, r.GPUs)
			for _, p := range r.Problems {
				fmt.Fprintln(w, "  PROBLEM:", p)
			}
		}
	}
	if problems > 0 {
		return fmt.Errorf("verify: %d problem(s): the engine would refuse or mis-load %s", problems, dir)
	}
	return nil
}

// warnEngines checks a finished conversion against both engines' rules and writes what each
// would refuse, and the launch flags it needs, as warnings.
func warnEngines(errw io.Writer, dir string) {
	reps, err := checkEngines(dir, engines.Engines, 0, 0)
	if err != nil {
		fmt.Fprintf(errw, "warning: engine check skipped: %v\n", err)
		return
	}
	for _, r := range reps {
		for _, f := range r.Flags {
			fmt.Fprintf(errw, "note: %s: start the %s server with %s (rule %s; pdq plan --serve %s prints the commands)\n",
				r.Engine, filepath.Base(r.Dir), f.Flag, f.Rule, r.Engine)
		}
		for _, p := range r.Problems {
			fmt.Fprintf(errw, "warning: %s: %s\n", filepath.Base(r.Dir), p)
		}
	}
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// printGPUs writes, for the routed experts' format, on which GPU generations the engine loads it
// and through what.
func printGPUs(w io.Writer, f engines.Format, cells []engines.Support) {
	if len(cells) == 0 {
		return
	}
	fmt.Fprintf(w, "  routed experts %s:\n", f)
	for _, s := range cells {
		g, _ := engines.ParseGPU(fmt.Sprint(s.MinSM))
		verdict := "loads"
		if !s.Loads {
			verdict = "does NOT load"
		}
		fmt.Fprintf(w, "    %s: %s: %s [%s]\n", g, verdict, s.Path, s.Source)
		if s.Note != "" {
			fmt.Fprintf(w, "      note: %s\n", s.Note)
		}
	}
}
