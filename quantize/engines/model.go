package engines

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

// Family is a group of architectures whose modules the engines build alike.
type Family string

// The families pdq knows the engines' modules of.
const (
	// FamilyDeepSeek: DeepseekV3ForCausalLM (DeepSeek-V3, Kimi K2), DeepseekV32ForCausalLM and
	// GlmMoeDsaForCausalLM (GLM-5): MLA attention, deepseek_v2.py in both engines.
	FamilyDeepSeek Family = "deepseek"
	// FamilyGLM4: Glm4MoeForCausalLM (GLM-4.5/4.6/4.7): GQA attention, glm4_moe.py.
	FamilyGLM4 Family = "glm4"
)

// families maps config.json's architectures[0] to its family.
var families = map[string]Family{
	"DeepseekV3ForCausalLM": FamilyDeepSeek, "DeepseekV2ForCausalLM": FamilyDeepSeek,
	"DeepseekV32ForCausalLM": FamilyDeepSeek, "GlmMoeDsaForCausalLM": FamilyDeepSeek,
	"Glm4MoeForCausalLM": FamilyGLM4,
}

// FamilyOf returns the family and architecture of a config.json.
func FamilyOf(cfg map[string]any) (Family, string, bool) {
	a, _ := cfg["architectures"].([]any)
	if len(a) == 0 {
		if s, ok := cfg["architectures"].([]string); ok && len(s) > 0 {
			f, ok := families[s[0]]
			return f, s[0], ok
		}
		return "", "", false
	}
	arch, _ := a[0].(string)
	f, ok := families[arch]
	return f, arch, ok
}

// ModuleKind says how an engine builds a module.
type ModuleKind int

// The module kinds.
const (
	KindLinear      ModuleKind = iota // a LinearBase: the quantization config decides its scheme
	KindMoE                           // a FusedMoE over routed experts: one scheme for all
	KindUnquantized                   // built with quant_config=None or as torch.nn.Linear: a plain weight
	KindEmbedding                     // embeddings and heads: compressed-tensors never quantizes them
)

// Module is one module an engine builds.
type Module struct {
	Name  string     // the engine's name: "model.layers.0.mlp.gate_up_proj"
	Parts []string   // the checkpoint modules it loads, in the fused order
	Kind  ModuleKind //
	Draft bool       // built by the MTP layer's draft model (speculative decoding)
	Why   string     // for KindUnquantized: which engine code builds it so
}

// fusedParts are the checkpoint modules the engines fuse, by fused name per engine and family.
type fusedSpec struct {
	parts  []string
	sglang string // the module SGLang builds
	vllm   string
}

var fusedByFamily = map[Family][]fusedSpec{
	FamilyDeepSeek: {
		{[]string{"gate_proj", "up_proj"}, "gate_up_proj", "gate_up_proj"},
		{[]string{"q_a_proj", "kv_a_proj_with_mqa"}, "fused_qkv_a_proj_with_mqa", "fused_qkv_a_proj"},
	},
	FamilyGLM4: {
		{[]string{"gate_proj", "up_proj"}, "gate_up_proj", "gate_up_proj"},
		{[]string{"q_proj", "k_proj", "v_proj"}, "qkv_proj", "qkv_proj"},
	},
}

// PackedMapping is the packed_modules_mapping the engine registers for the family: the fused
// names should_ignore_layer splits back into parts. The MTP draft models register none that pdq
// has read (taken as none: stricter, never looser).
//
// SGLang deepseek_v2.py: only "fused_qkv_a_proj_with_mqa" (with q_lora_rank). SGLang glm4_moe.py
// (srcSGLGLM4): Glm4MoeForCausalLM declares no packed_modules_mapping; its load_weights stacks
// q/k/v_proj into qkv_proj and gate/up_proj into gate_up_proj, so an ignore entry naming only the
// fused name matches nothing there. vLLM deepseek_v2.py: "gate_up_proj" and "fused_qkv_a_proj";
// vLLM glm4_moe.py (srcVLLMGLM4): "qkv_proj" [q, k, v] and "gate_up_proj" [gate, up].
func PackedMapping(e Engine, f Family, draft bool) map[string][]string {
	m := map[string][]string{}
	if draft {
		return m
	}
	switch {
	case e == SGLang && f == FamilyDeepSeek:
		m["fused_qkv_a_proj_with_mqa"] = []string{"q_a_proj", "kv_a_proj_with_mqa"}
	case e == VLLM && f == FamilyDeepSeek:
		m["gate_up_proj"] = []string{"gate_proj", "up_proj"}
		m["fused_qkv_a_proj"] = []string{"q_a_proj", "kv_a_proj_with_mqa"}
	case e == VLLM && f == FamilyGLM4:
		m["gate_up_proj"] = []string{"gate_proj", "up_proj"}
		m["qkv_proj"] = []string{"q_proj", "k_proj", "v_proj"}
	}
	return m
}

// AlwaysUnquantized reports modules both engines build without a quantization method whatever
// config.json says, so every checkpoint must hold them as plain (BF16) weights: the MoE router
// (SGLang MoEGate, vLLM ReplicatedLinear quant_config=None), the sparse-attention indexer's
// weights_proj (quant_config=None in both), and the MTP layer's eh_proj (torch.nn.Linear in
// deepseek_nextn.py and deepseek_mtp.py). The reason is returned for messages.
func AlwaysUnquantized(module string) (string, bool) {
	switch {
	case strings.HasSuffix(module, ".mlp.gate") || module == "mlp.gate":
		return "the MoE router (MoEGate / ReplicatedLinear with quant_config=None)", true
	case strings.HasSuffix(module, "indexer.weights_proj"):
		return "the indexer's weights_proj (ReplicatedLinear with quant_config=None)", true
	case strings.HasSuffix(module, "eh_proj"):
		return "the MTP layer's eh_proj (torch.nn.Linear)", true
	}
	return "", false
}

var (
	reLayer  = regexp.MustCompile(`^model\.layers\.(\d+)\.(.*)$`)
	reExpert = regexp.MustCompile(`^(.*\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)$`)
)

// nextnOwn are the MTP layer's own modules, outside its decoder block.
var nextnOwn = []string{"eh_proj", "enorm", "hnorm", "shared_head"}

// engineName maps a checkpoint module to the name the engine builds it under. MTP layers
// (index >= num_hidden_layers) are skipped by the main model and built by the draft model:
// SGLang's deepseek_nextn.py renames "model.layers.N.X" to "model.decoder.X" ("model.X" for
// eh_proj, enorm, hnorm, shared_head); vLLM's deepseek_mtp.py builds "model.layers.N.mtp_block.X".
func engineName(e Engine, module string, layers int) (string, bool) {
	sm := reLayer.FindStringSubmatch(module)
	if sm == nil {
		return module, false
	}
	idx, _ := strconv.Atoi(sm[1])
	if idx < layers {
		return module, false
	}
	rest := sm[2]
	own := false
	for _, o := range nextnOwn {
		if rest == o || strings.HasPrefix(rest, o+".") {
			own = true
		}
	}
	if e == SGLang {
		if own {
			return "model." + rest, true
		}
		return "model.decoder." + rest, true
	}
	if own {
		return module, true
	}
	return "model.layers." + sm[1] + ".mtp_block." + rest, true
}

// buildModules lists the modules engine e builds for the checkpoint modules present (modules
// holding a 2-D weight or an INT4 weight_packed), sorted by name.
func buildModules(e Engine, f Family, ckModules []string, layers int) []Module {
	present := map[string]bool{}
	for _, m := range ckModules {
		present[m] = true
	}
	byName := map[string]*Module{}
	add := func(name string, kind ModuleKind, draft bool, part, why string) {
		m := byName[name]
		if m == nil {
			m = &Module{Name: name, Kind: kind, Draft: draft, Why: why}
			byName[name] = m
		}
		m.Parts = append(m.Parts, part)
	}
	for _, ck := range ckModules {
		name, draft := engineName(e, ck, layers)
		if sm := reExpert.FindStringSubmatch(name); sm != nil {
			add(sm[1], KindMoE, draft, ck, "")
			continue
		}
		if why, ok := AlwaysUnquantized(ck); ok {
			add(name, KindUnquantized, draft, ck, why)
			continue
		}
		if role := rules.RoleOf(ck + ".weight"); role == rules.RoleEmbedding {
			add(name, KindEmbedding, draft, ck, "")
			continue
		}
		parent, leaf := splitLast(name)
		ckParent, _ := splitLast(ck)
		fusedTo := ""
		for _, s := range fusedByFamily[f] {
			if !contains(s.parts, leaf) {
				continue
			}
			all := true
			for _, p := range s.parts {
				all = all && present[ckParent+"."+p]
			}
			if all {
				fusedTo = s.vllm
				if e == SGLang {
					fusedTo = s.sglang
				}
			}
		}
		if fusedTo != "" {
			add(parent+"."+fusedTo, KindLinear, draft, ck, "")
		} else {
			add(name, KindLinear, draft, ck, "")
		}
	}
	out := make([]Module, 0, len(byName))
	for _, m := range byName {
		if m.Kind != KindMoE {
			sortParts(m, f)
		} else {
			sort.Strings(m.Parts)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sortParts orders a fused module's parts as the engine's mapping lists them.
func sortParts(m *Module, f Family) {
	rank := func(p string) int {
		_, leaf := splitLast(p)
		for _, s := range fusedByFamily[f] {
			for i, q := range s.parts {
				if q == leaf {
					return i
				}
			}
		}
		return 0
	}
	sort.SliceStable(m.Parts, func(i, j int) bool { return rank(m.Parts[i]) < rank(m.Parts[j]) })
}

// splitLast splits "a.b.c" into "a.b" and "c".
func splitLast(s string) (string, string) {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}
