package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/serving"
)

// serveFlags are pdq plan's serving-plan flags (docs/SERVING.md).
type serveFlags struct {
	gpus, tp, ep int
	dp           int
	dpLMHead     bool
	gpuMemory    int64
	kvDType      string
	memFraction  float64
	reserve      int64
	seqLen       int
	serve        string
	out          string
	gpu          string // the GPU model, for the decode format's GPU rules
	cmd          *cobra.Command
}

func (f *serveFlags) add(cmd *cobra.Command) {
	f.cmd = cmd
	fl := cmd.Flags()
	fl.IntVar(&f.gpus, "gpus", 8, "serving plan: GPUs of each pool (prefill, decode); a multiple of --tp")
	fl.Var(gpuBytesValue{bytesValue{&f.gpuMemory}}, "gpu-memory", "serving plan: memory of one GPU, e.g. 141GiB; turns the serving plan on")
	fl.IntVar(&f.tp, "tp", 0, "serving plan: GPUs of one server, its tensor-parallel size for the experts (default --gpus; with vLLM and --dp: --tensor-parallel-size x --data-parallel-size)")
	fl.IntVar(&f.ep, "ep", 1, "serving plan: expert-parallel size inside the TP group (1: experts split by TP; vLLM takes 1 or TP)")
	fl.IntVar(&f.dp, "dp", 1, "serving plan: DP attention, attention data-parallel size inside one server (SGLang --enable-dp-attention --dp-size N; vLLM --data-parallel-size N with --tensor-parallel-size TP/N): each of the N ranks keeps its own requests' KV cache, attention weights are split TP/N ways (whole with --dp = --tp), the experts still across all --tp GPUs; must divide --tp; 1: off")
	fl.BoolVar(&f.dpLMHead, "dp-lm-head", false, "serving plan, with --dp and SGLang: lm_head split across the attention-TP group, not all TP GPUs (SGLang --enable-dp-lm-head)")
	fl.StringVar(&f.kvDType, "kv-cache-dtype", "bf16", "serving plan: KV-cache dtype, bf16 (the engines' auto for these models) or fp8_e4m3")
	fl.Float64Var(&f.memFraction, "mem-fraction", 0, "serving plan: share of GPU memory for weights + KV cache (default: the engine's own, SGLang's --mem-fraction-static heuristic per role, vLLM's --gpu-memory-utilization 0.9)")
	fl.Var(bytesValue{&f.reserve}, "reserve", "serving plan: ASSUMPTION, memory inside the fraction that holds neither weights nor KV cache (sglang: CUDA context, communicators; vllm: also activations and CUDA graphs)")
	fl.Lookup("reserve").DefValue = "1GiB for sglang, 6GiB for vllm"
	fl.Lookup("gpu-memory").DefValue = "" // off
	fl.IntVar(&f.seqLen, "seq-len", 0, "serving plan: tokens of one sequence, for the fits-one-sequence check (default config.json max_position_embeddings)")
	fl.StringVar(&f.serve, "serve", "", "sglang or vllm: plan under that engine's rules and print launch commands for the prefill and decode pools (SGLang v0.5.18, vLLM v0.15; see docs/SERVING.md)")
	fl.StringVar(&f.out, "out", "DIR", "with --serve: the --out DIR of pdq convert, for the model paths DIR/prefill and DIR/decode")
	fl.StringVar(&f.gpu, "gpu", "", "serving plan: the GPU model (a100, h100, h200, b200, gb200, or sm80, sm90, sm100): the engine must load the decode experts' format on it (with --serve the plan fails if not)")
}

func (f *serveFlags) enabled() bool { return f.gpuMemory > 0 || f.serve != "" }

// checkOff refuses serving-plan flags given without --gpu-memory or --serve: they would be
// ignored without a word.
func (f *serveFlags) checkOff() error {
	if f.enabled() || f.cmd == nil {
		return nil
	}
	for _, name := range []string{"kv-cache-dtype", "gpus", "tp", "ep", "dp", "dp-lm-head", "mem-fraction", "reserve", "seq-len", "out", "gpu"} {
		if fl := f.cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return usagef("plan: --%s is a serving-plan flag: give --gpu-memory (the memory of one GPU, e.g. 141GiB) to plan serving", name)
		}
	}
	return nil
}

// gpuBytesValue is --gpu-memory: a size that must name its unit, since a bare 141 is far more
// likely 141 GiB than 141 bytes.
type gpuBytesValue struct{ bytesValue }

func (g gpuBytesValue) Set(s string) error {
	t := strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return fmt.Errorf("%q has no unit: did you mean %sGiB (or %sGB)?", s, t, t)
	}
	return g.bytesValue.Set(s)
}

// servingSummary is the "serving" object of pdq plan --json.
type servingSummary struct {
	Engine         serving.Engine `json:"engine"`
	GPUs           int            `json:"gpus_per_pool"`
	GPUMemory      int64          `json:"gpu_memory_bytes"`
	TP             int            `json:"tp"`
	EP             int            `json:"ep"`
	DP             int            `json:"dp_attention"`
	AttnTP         int            `json:"attention_tp"`
	DPLMHead       bool           `json:"dp_lm_head,omitempty"`
	ServersPerPool int            `json:"servers_per_pool"`
	KVDType        string         `json:"kv_cache_dtype"`
	GPU            string         `json:"gpu,omitempty"` // --gpu, as its generation
	Assumptions    []string       `json:"assumptions"`
	// Source, Prefill and Decode are per server (one TP group); nil for an output not planned.
	Source   *serving.Capacity `json:"source,omitempty"`
	Prefill  *serving.Capacity `json:"prefill,omitempty"`
	Decode   *serving.Capacity `json:"decode,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	Commands []launchCommand   `json:"commands,omitempty"`
}

type launchCommand struct {
	Name  string   `json:"name"`
	Env   []string `json:"env,omitempty"`
	Args  []string `json:"args"`
	Shell string   `json:"shell"`
	Note  string   `json:"note,omitempty"`
}

// errServePlan: the serving plan of --serve cannot work (weights over budget, no room for one
// sequence, expert widths the kernels reject).
var errServePlan = errors.New("serving plan cannot work")

// plan computes the serving summary of a conversion plan. Bad sizes are usage errors.
func (f *serveFlags) plan(p *convert.Plan) (*servingSummary, error) {
	if f.gpuMemory <= 0 {
		return nil, usagef("--serve needs --gpu-memory (the memory of one GPU, e.g. 141GiB)")
	}
	engine := serving.SGLang
	if f.serve != "" {
		e, err := serving.ParseEngine(f.serve)
		if err != nil {
			return nil, usageError{err}
		}
		engine = e
	}
	kvdt, err := serving.ParseKVDType(f.kvDType)
	if err != nil {
		return nil, usageError{err}
	}
	tp := f.tp
	if tp == 0 {
		tp = f.gpus
	}
	if tp <= 0 || f.gpus <= 0 || f.gpus%tp != 0 {
		return nil, usagef("--gpus %d is not a multiple of --tp %d", f.gpus, tp)
	}
	if f.memFraction < 0 || f.memFraction > 1 {
		return nil, usagef("--mem-fraction %g outside (0, 1]", f.memFraction)
	}
	m, err := serving.ModelFromConfig(p.Config)
	if err != nil {
		return nil, err
	}
	if f.dp <= 0 {
		return nil, usagef("--dp %d: want the number of DP-attention ranks of one server, at least 1 (1: off)", f.dp)
	}
	if tp%f.dp != 0 {
		return nil, usagef("--dp %d does not divide --tp %d: DP attention splits one server's %d GPUs into DP ranks of TP/DP GPUs each", f.dp, tp, tp)
	}
	if f.dpLMHead && f.dp == 1 {
		return nil, usagef("--dp-lm-head needs DP attention (--dp N, N > 1)")
	}
	par := serving.Parallel{TP: tp, EP: f.ep, DP: f.dp, DPLMHead: f.dpLMHead, Engine: engine}
	if err := par.Validate(m); err != nil {
		return nil, usageError{err}
	}
	kv, err := m.KVBytesPerToken(kvdt, par)
	if err != nil {
		return nil, usageError{err}
	}
	reserve := f.reserve
	if !f.cmd.Flags().Changed("reserve") {
		reserve = serving.DefaultReserve(engine)
	}
	seqLen := f.seqLen
	if seqLen == 0 {
		seqLen = m.MaxPosition
	}
	s := &servingSummary{Engine: engine, GPUs: f.gpus, GPUMemory: f.gpuMemory, TP: tp, EP: f.ep, DP: f.dp, AttnTP: par.AttnTP(), DPLMHead: f.dpLMHead,
		ServersPerPool: f.gpus / tp, KVDType: string(kvdt)}
	s.Assumptions = append(s.Assumptions, fmt.Sprintf("reserve %s per GPU inside the memory fraction for what is neither weights nor KV cache (an assumption; --reserve sets it)", formatBytes(reserve)))
	if f.memFraction == 0 {
		s.Assumptions = append(s.Assumptions, fmt.Sprintf("memory fraction: %s's default for this GPU size, TP and role (--mem-fraction sets it)", engine))
	}
	dpa := "DP attention off"
	if f.dp > 1 {
		dpa = fmt.Sprintf("DP attention: %d ranks of attention TP%d, each keeping only its own requests' KV cache", f.dp, par.AttnTP())
	}
	s.Assumptions = append(s.Assumptions, "MTP layers are not loaded (no speculative decoding); "+dpa+"; CUDA graphs on")
	for _, c := range []struct {
		which serving.Checkpoint
		role  serving.Role
		dst   **serving.Capacity
	}{{serving.Source, serving.RoleUnified, &s.Source}, {serving.Prefill, serving.RolePrefill, &s.Prefill}, {serving.Decode, serving.RoleDecode, &s.Decode}} {
		ts := serving.Tensors(p, c.which)
		if ts == nil {
			continue
		}
		w, err := m.PerGPUWeights(ts, par)
		if err != nil {
			return nil, err
		}
		frac := f.memFraction
		if frac == 0 {
			frac = serving.DefaultMemFraction(engine, f.gpuMemory, par, c.role, m.KVLoraRank > 0)
		}
		capacity := serving.Plan(c.role, serving.Budget{GPUMemory: f.gpuMemory, MemFraction: frac, Reserve: reserve}, w, kv, seqLen)
		*c.dst = &capacity
		fp8, g := serving.ExpertFormats(p, c.which)
		widths := m.ExpertWidthProblems(par, fp8, g)
		if c.which == serving.Decode {
			widths = append(widths, m.FormatWidthProblems(par, p.Options.DecodeFormat, engine)...)
		}
		for _, pr := range widths {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s", c.which, pr))
		}
		for _, pr := range capacity.Problems {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s", c.which, pr))
		}
	}
	sm := 0
	if f.gpu != "" {
		g, err := engines.ParseGPU(f.gpu)
		if err != nil {
			return nil, usagef("--gpu %q: want a100, h100, h200, b200, gb200, or sm80, sm90, sm100 (the generations pdq has the engines' rules for)", f.gpu)
		}
		sm = g.SM
		s.GPU = g.String()
	}
	prefillFlags, decodeFlags, refused := serving.EngineFlagsOn(p, engine, sm)
	s.Warnings = append(s.Warnings, refused...)
	if f.serve != "" && s.Prefill != nil && s.Decode != nil {
		d := serving.Deployment{Engine: engine, Parallel: par, KVDType: kvdt,
			PrefillDir: path.Join(f.out, "prefill"), DecodeDir: path.Join(f.out, "decode"),
			PrefillFraction: s.Prefill.MemFraction, DecodeFraction: s.Decode.MemFraction,
			PrefillFlags: prefillFlags, DecodeFlags: decodeFlags}
		cmds, err := d.Commands()
		if err != nil {
			return nil, usageError{err}
		}
		for _, c := range cmds {
			s.Commands = append(s.Commands, launchCommand{Name: c.Name, Env: c.Env, Args: c.Line(), Shell: c.String(), Note: c.Note})
		}
	}
	return s, nil
}

// check returns errServePlan, naming the reasons, when --serve was asked for and the prefill or
// decode server cannot work; without --serve the problems are warnings only.
func (f *serveFlags) check(s *servingSummary) error {
	if s == nil || f.serve == "" {
		return nil
	}
	var why []string
	for _, w := range s.Warnings {
		if !strings.HasPrefix(w, string(serving.Source)+":") {
			why = append(why, w)
		}
	}
	if why == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", errServePlan, strings.Join(why, "; "))
}

type capacityRow struct {
	name string
	c    *serving.Capacity
}

// rows lists the planned checkpoints in source, prefill, decode order.
func (s *servingSummary) rows() []capacityRow {
	var rs []capacityRow
	for _, r := range []capacityRow{{"source", s.Source}, {"prefill", s.Prefill}, {"decode", s.Decode}} {
		if r.c != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// print writes the serving plan for people.
func (s *servingSummary) print(w io.Writer) {
	dp := ""
	if s.DP > 1 {
		dp = fmt.Sprintf(" DP%d (attention TP%d)", s.DP, s.AttnTP)
		if s.DPLMHead {
			dp += " DP LM head"
		}
	}
	gpu := ""
	if s.GPU != "" {
		gpu = " " + s.GPU
	}
	fmt.Fprintf(w, "\nserving plan (%s rules): %d GPU(s)%s of %s per pool, %d server(s) of TP%d EP%d%s, KV cache %s\n",
		s.Engine, s.GPUs, gpu, formatBytes(s.GPUMemory), s.ServersPerPool, s.TP, s.EP, dp, s.KVDType)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  checkpoint\trole\tweights/GPU\tfraction\treserve\tKV cache/GPU\ttokens/server\tsequences")
	for _, r := range s.rows() {
		seqs := "-"
		if r.c.SeqLen > 0 {
			seqs = fmt.Sprintf("%.1f x %d", r.c.Sequences, r.c.SeqLen)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%.3f\t%s\t%s\t%d\t%s\n", r.name, r.c.Role, formatBytes(r.c.Weights.PerGPU), r.c.MemFraction,
			formatBytes(r.c.Reserve), formatBytes(r.c.KVBytes), r.c.Tokens, seqs)
	}
	tw.Flush()
	if rows := s.rows(); len(rows) > 0 {
		k := rows[0].c.KV
		where := "split across TP ranks"
		if k.Replicated {
			where = "the same on every TP rank"
		}
		if k.DPRanks > 1 {
			where = fmt.Sprintf("split across the attention TP%d group", k.AttnTP)
			if k.Replicated {
				where = fmt.Sprintf("the same on each GPU of the attention TP%d group", k.AttnTP)
			}
			where += fmt.Sprintf("; each of %d DP ranks keeps only its own tokens", k.DPRanks)
		}
		idx := ""
		if k.IndexerBytes > 0 {
			idx = fmt.Sprintf(" + %d B indexer", k.IndexerBytes)
		}
		fmt.Fprintf(w, "  KV per token: %s, %d layers x (%d B%s) = %d B per GPU, %s\n", k.Attention, k.Layers, k.LayerBytes, idx, k.PerToken, where)
	}
	var mtp []string
	for _, r := range s.rows() {
		if r.c.Weights.NotLoaded > 0 {
			mtp = append(mtp, fmt.Sprintf("%s %s", r.name, formatBytes(r.c.Weights.NotLoaded)))
		}
	}
	if mtp != nil {
		fmt.Fprintf(w, "  not loaded: the MTP layers (%s), a draft model only with speculative decoding\n", strings.Join(mtp, ", "))
	}
	for _, a := range s.Assumptions {
		fmt.Fprintf(w, "  assumed: %s\n", a)
	}
	for _, wn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", wn)
	}
	if len(s.Commands) > 0 {
		fmt.Fprintf(w, "\nlaunch commands (%s; the hosts are placeholders):\n", s.Engine)
		for _, c := range s.Commands {
			fmt.Fprintf(w, "\n# %s\n", c.Name)
			if c.Note != "" {
				fmt.Fprintf(w, "# %s\n", c.Note)
			}
			fmt.Fprintf(w, "%s\n", c.Shell)
		}
	}
}
