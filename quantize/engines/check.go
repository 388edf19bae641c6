package engines

import (
	"fmt"
	"sort"
	"strings"

	"pdq/quantize/rules"
	"pdq/safetensors"
)

// Tensor is what Check reads of one tensor: its header entry.
type Tensor struct {
	Name  string
	DType safetensors.DType
	Shape []int64
}

// Input is a checkpoint as the engines see it before loading data: config.json and the headers.
type Input struct {
	Config  map[string]any
	Tensors []Tensor
	// GlobalScales holds the values of the F32 weight_global_scale tensors (FP4 global scales), by tensor
	// name, for the rules that compare them; nil when not read (those rules are then skipped).
	GlobalScales map[string]float32
}

// Options describe the server that loads the checkpoint.
type Options struct {
	// TP is the tensor-parallel size of the MoE layers (0 or 1: none).
	TP int
	// Flags are launch flags the server gets; a finding that a flag resolves is then met.
	Flags []string
	// SM is the compute capability of the server's GPUs (90 for H100/H200, ParseGPU); 0 leaves
	// the GPU rules out (Result.ExpertFormat and SupportTable then say which GPUs load it).
	SM int
}

// Finding is one module an engine would refuse or mis-load, or a launch flag it needs.
type Finding struct {
	Engine  Engine `json:"engine"`
	Module  string `json:"module,omitempty"` // the engine's module name, or "" for the whole checkpoint
	Rule    string `json:"rule"`
	Problem string `json:"problem"`
	Source  string `json:"source"`
	// Flag, when set, is the launch flag that makes the engine load the checkpoint right.
	Flag string `json:"flag,omitempty"`
}

// String is one line for people.
func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", f.Engine)
	if f.Module != "" {
		fmt.Fprintf(&b, "%s: ", f.Module)
	}
	fmt.Fprintf(&b, "%s [rule %s; %s]", f.Problem, f.Rule, f.Source)
	return b.String()
}

// Result is what Check found.
type Result struct {
	Engine Engine `json:"engine"`
	Kind   string `json:"kind"` // "decode" (compressed-tensors), "prefill" (FP8 blocks) or "dense"
	// Problems are what the engine refuses or mis-loads with the given options.
	Problems []Finding `json:"problems"`
	// Flags are the launch flags the checkpoint needs (met when Options.Flags has them).
	Flags []Finding `json:"flags,omitempty"`
	// Modules is how many engine modules were checked.
	Modules int `json:"modules"`
	// ExpertFormat is the routed experts' format in a compressed-tensors checkpoint ("" when
	// the checkpoint has none), the row of the format × engine × GPU table that applies.
	ExpertFormat Format `json:"expert_format,omitempty"`
}

// OK reports a checkpoint the engine loads as written (with Flags passed).
func (r *Result) OK() bool { return len(r.Problems) == 0 }

// RequiredFlags lists the distinct launch flags of r.Flags, sorted.
func (r *Result) RequiredFlags() []string {
	var out []string
	for _, f := range r.Flags {
		if !contains(out, f.Flag) {
			out = append(out, f.Flag)
		}
	}
	sort.Strings(out)
	return out
}

// checker carries one Check.
type checker struct {
	e      Engine
	fam    Family
	arch   string
	cfg    map[string]any
	o      Options
	in     Input
	byName map[string]Tensor
	res    *Result
}

func (c *checker) problem(module, rule string, src Source, format string, args ...any) {
	c.res.Problems = append(c.res.Problems, Finding{Engine: c.e, Module: module, Rule: rule,
		Problem: fmt.Sprintf(format, args...), Source: src.String()})
}

// Check applies engine e's loading rules to a checkpoint.
func Check(e Engine, in Input, o Options) *Result {
	c := &checker{e: e, cfg: in.Config, o: o, in: in, byName: map[string]Tensor{}, res: &Result{Engine: e}}
	for _, t := range in.Tensors {
		c.byName[t.Name] = t
	}
	fam, arch, ok := FamilyOf(in.Config)
	if !ok {
		c.problem("", "architecture", srcSGLDeepseek, "architectures %q is not one pdq knows %s's modules of (DeepseekV3ForCausalLM, DeepseekV32ForCausalLM, GlmMoeDsaForCausalLM, Glm4MoeForCausalLM)", arch, e)
		return c.res
	}
	c.fam, c.arch = fam, arch
	layers, _ := rules.ConfigInt(in.Config, "num_hidden_layers")
	var ck []string
	seen := map[string]bool{}
	for _, t := range in.Tensors {
		m, suffix := rules.ModuleOf(t.Name)
		if (suffix == "weight" && len(t.Shape) == 2) || suffix == "weight_packed" {
			if !seen[m] {
				seen[m] = true
				ck = append(ck, m)
			}
		}
	}
	sort.Strings(ck)
	mods := buildModules(e, fam, ck, int(layers))
	c.res.Modules = len(mods)
	qc := rules.QuantizationConfig(in.Config)
	method, _ := qc["quant_method"].(string)
	switch method {
	case "compressed-tensors":
		c.res.Kind = "decode"
		c.checkCompressed(qc, mods)
	case "fp8":
		c.res.Kind = "prefill"
		c.checkFP8(qc, mods)
	case "":
		c.res.Kind = "dense"
		c.checkDense(mods)
	default:
		c.problem("", "quant-method", srcSGLCT, "quant_method %q is not one pdq writes (compressed-tensors or fp8)", method)
	}
	c.checkFusion(qc, mods)
	sort.SliceStable(c.res.Problems, func(i, j int) bool { return c.res.Problems[i].Module < c.res.Problems[j].Module })
	return c.res
}

// plain reports whether module m is a plain float weight (no quantized companions).
func (c *checker) plain(m string) (bool, string) {
	w, ok := c.byName[m+".weight"]
	switch {
	case !ok:
		if _, p := c.byName[m+".weight_packed"]; p {
			return false, "holds packed 4-bit weight_packed"
		}
		return false, "has no weight"
	case w.DType == safetensors.F8E4M3:
		return false, "holds an F8_E4M3 weight"
	case !w.DType.IsFloat():
		return false, "holds a " + string(w.DType) + " weight"
	}
	for _, s := range []string{".weight_scale", ".weight_scale_inv", ".weight_packed"} {
		if _, ok := c.byName[m+s]; ok {
			return false, "holds " + strings.TrimPrefix(s, ".")
		}
	}
	return true, ""
}

// checkDense: a checkpoint without quantization_config must hold plain weights only.
func (c *checker) checkDense(mods []Module) {
	for _, m := range mods {
		for _, p := range m.Parts {
			if ok, why := c.plain(p); !ok {
				c.problem(m.Name, "no-quantization-config", srcSGLCT, "%s %s but config.json has no quantization_config: the engine builds it unquantized and reads the codes as values", p, why)
			}
		}
	}
}

// checkUnquantized: modules the engines always build unquantized must be plain weights.
func (c *checker) checkUnquantized(m Module) {
	src := srcSGLDeepseek
	switch {
	case c.e == VLLM && m.Draft:
		src = srcVLLMMTP
	case c.e == VLLM:
		src = srcVLLMDeepseek
	case m.Draft:
		src = srcSGLNextN
	}
	for _, p := range m.Parts {
		if ok, why := c.plain(p); !ok {
			c.problem(m.Name, "always-unquantized", src, "%s is %s, built without a quantization method, but %s (keep it BF16)", p, m.Why, why)
		}
	}
}

// moeTP is the MoE tensor-parallel size.
func (c *checker) moeTP() int {
	if c.o.TP > 1 {
		return c.o.TP
	}
	return 1
}
