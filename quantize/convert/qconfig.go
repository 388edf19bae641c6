package convert

import (
	"fmt"
	"sort"
	"strings"

	"pdq/quantize/engines"
	"pdq/quantize/rules"
)

// compressedTensorsVersion is the compressed-tensors format version written into decode configs
// whose groups use no field of a later release (INT4's).
const compressedTensorsVersion = "0.12.2"

// compressedTensorsScaleDTypeVersion is the first compressed-tensors release whose
// QuantizationArgs has scale_dtype and zp_dtype (which 0.12.2 forbids as extra fields) and the
// newer packed formats: the version of a decode config whose groups carry those fields.
const compressedTensorsScaleDTypeVersion = "0.13.0"

// ctVersion is the version a decode config with these config groups declares.
func ctVersion(groups map[string]any) string {
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		for _, args := range []string{"weights", "input_activations", "output_activations"} {
			a, _ := gm[args].(map[string]any)
			_, s := a["scale_dtype"]
			_, z := a["zp_dtype"]
			if s || z {
				return compressedTensorsScaleDTypeVersion
			}
		}
	}
	return compressedTensorsVersion
}

// cloneConfig deep-copies a parsed config.json, numbers as written (nil gives an empty map).
func cloneConfig(cfg map[string]any) map[string]any { return rules.CloneConfig(cfg) }

// prefillConfig is the source config with the DeepSeek-style FP8 block quantization_config.
func (p *Plan) prefillConfig() map[string]any {
	c := cloneConfig(p.Config)
	qc := map[string]any{
		"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
		"weight_block_size": []int{FP8BlockSize, FP8BlockSize},
	}
	var dense []string
	for _, m := range p.Modules {
		if m.Linear && m.Scheme(KindPrefill) != SchemeFP8Block {
			dense = append(dense, m.Name)
		}
	}
	if len(dense) > 0 {
		qc["ignored_layers"] = dense
	}
	setQuantConfig(c, qc)
	return c
}

// setQuantConfig puts an output's quantization_config qc into c, a clone of the source config,
// where the source keeps its own: under text_config when that holds one (a multimodal wrapper
// such as Kimi K2.5's, which the engines read there), at the top level when that holds one or
// neither does, so that no stale copy of the source's is left.
func setQuantConfig(c map[string]any, qc any) {
	_, top := c["quantization_config"]
	tc := rules.TextConfig(c)
	nested := tc != nil && tc["quantization_config"] != nil
	if nested {
		tc["quantization_config"] = qc
	}
	if top || !nested {
		c["quantization_config"] = qc
	}
}

// decodeConfig is the source config with the compressed-tensors quantization_config of the decode
// checkpoint: one config group per family of encodings the modules use (the targets' first,
// matching every Linear; the others by name patterns), every other Linear listed in "ignore".
func (p *Plan) decodeConfig() map[string]any {
	c := cloneConfig(p.Config)
	primary := encodings[p.Options.targetScheme()].(ctGrouped)
	key0, format, frag0 := primary.ctGroup(&p.Options)
	members := map[string][]string{key0: nil}
	frags := map[string]map[string]any{key0: frag0}
	formats := map[string]string{key0: format}
	var dense, all []string
	for _, m := range p.Modules {
		if !m.Linear && !isHeadOrRouter(m) {
			continue
		}
		name := strings.TrimSuffix(m.Name, ".weight") // head and router are planned as plain tensors
		g, ok := encodings[m.Scheme(KindDecode)].(ctGrouped)
		if !ok {
			dense = append(dense, name)
			continue
		}
		all = append(all, name)
		key, f, frag := g.ctGroup(&p.Options)
		members[key] = append(members[key], name)
		frags[key], formats[key] = frag, f
	}
	others := func(key string) []string { // every grouped module outside group key, and the dense ones
		in := make(map[string]bool, len(members[key]))
		for _, n := range members[key] {
			in[n] = true
		}
		var o []string
		for _, n := range all {
			if !in[n] {
				o = append(o, n)
			}
		}
		return append(o, dense...)
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		if k != key0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	groups := map[string]any{"group_0": withTargets(frags[key0], []string{"Linear"})}
	for i, k := range keys {
		groups[fmt.Sprintf("group_%d", i+1)] = withTargets(frags[k], Patterns(members[k], others(k)))
		format = "mixed-precision"
	}
	setQuantConfig(c, map[string]any{
		"quant_method": "compressed-tensors", "format": format, "quantization_status": "compressed",
		"config_groups": groups, "ignore": Patterns(dense, all),
		"kv_cache_scheme": nil, "sparsity_config": map[string]any{}, "global_compression_ratio": nil,
		"version": ctVersion(groups),
	})
	return c
}

// ctGrouped is implemented by the encodings whose modules form a compressed-tensors config group
// of the decode checkpoint; a module whose encoding is not is listed in "ignore".
type ctGrouped interface {
	// ctGroup returns the group's key (encodings with one key share a group), its format and its
	// config group without "targets".
	ctGroup(o *Options) (key, format string, group map[string]any)
}

// withTargets returns a copy of a config group with its targets.
func withTargets(group map[string]any, targets []string) map[string]any {
	g := make(map[string]any, len(group)+1)
	for k, v := range group {
		g[k] = v
	}
	g["targets"] = targets
	return g
}

// isHeadOrRouter reports modules the engines build as Linear layers although pdq never quantizes
// them: the LM head and the MoE router. They must be listed in "ignore".
func isHeadOrRouter(m *Module) bool {
	name := strings.TrimSuffix(m.Weight.Name, ".weight")
	return strings.HasSuffix(m.Weight.Name, ".weight") && len(m.Weight.Shape) == 2 &&
		(name == "lm_head" || strings.HasSuffix(name, ".mlp.gate") || strings.HasSuffix(name, "shared_head.head"))
}

// Patterns returns the compressed-tensors entries that reach every module in names, as the
// engines name it, and none in others (engines.Patterns: the convention and why).
func Patterns(names, others []string) []string { return engines.Patterns(names, others) }
