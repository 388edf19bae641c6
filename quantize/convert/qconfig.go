package convert

import (
	"strings"

	"pdq/quantize/engines"
	"pdq/quantize/rules"
)

// compressedTensorsVersion is the compressed-tensors format version written into decode configs.
const compressedTensorsVersion = "0.12.2"

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
		if m.Linear && m.Prefill != SchemeFP8Block {
			dense = append(dense, m.Name)
		}
	}
	if len(dense) > 0 {
		qc["ignored_layers"] = dense
	}
	c["quantization_config"] = qc
	return c
}

// int4Weights is the compressed-tensors weight quantization args of the INT4 group.
func (p *Plan) int4Weights() map[string]any {
	w := map[string]any{
		"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": p.Options.GroupSize,
		"dynamic": false, "actorder": nil, "observer": "minmax", "observer_kwargs": map[string]any{},
		"block_structure": nil,
	}
	if p.Options.GroupSize == PerChannel {
		w["strategy"], w["group_size"] = "channel", nil
	}
	return w
}

// decodeConfig is the source config with the compressed-tensors quantization_config of the decode
// checkpoint: INT4 routed experts, every other Linear listed in "ignore" (or, with --decode-dense
// fp8, in an FP8 block group).
func (p *Plan) decodeConfig() map[string]any {
	c := cloneConfig(p.Config)
	var int4, fp8, dense []string
	for _, m := range p.Modules {
		if !m.Linear && !isHeadOrRouter(m) {
			continue
		}
		name := strings.TrimSuffix(m.Name, ".weight") // head and router are planned as plain tensors
		switch m.Decode {
		case SchemeInt4:
			int4 = append(int4, name)
		case SchemeFP8Block, SchemeFP8Keep:
			fp8 = append(fp8, name)
		default:
			dense = append(dense, name)
		}
	}
	groups := map[string]any{
		"group_0": map[string]any{
			"targets": []string{"Linear"}, "format": "pack-quantized", "weights": p.int4Weights(),
			"input_activations": nil, "output_activations": nil,
		},
	}
	format := "pack-quantized"
	if len(fp8) > 0 {
		format = "mixed-precision"
		groups["group_1"] = map[string]any{
			"targets": Patterns(fp8, append(int4, dense...)), "format": "float-quantized",
			"weights": map[string]any{
				"num_bits": 8, "type": "float", "symmetric": true, "strategy": "block",
				"block_structure": []int{FP8BlockSize, FP8BlockSize}, "group_size": nil, "dynamic": false,
				"actorder": nil, "observer": "minmax", "observer_kwargs": map[string]any{},
			},
			"input_activations": map[string]any{
				"num_bits": 8, "type": "float", "symmetric": true, "strategy": "group", "group_size": FP8BlockSize,
				"dynamic": true, "actorder": nil, "observer": nil, "observer_kwargs": map[string]any{},
			},
			"output_activations": nil,
		}
	}
	c["quantization_config"] = map[string]any{
		"quant_method": "compressed-tensors", "format": format, "quantization_status": "compressed",
		"config_groups": groups, "ignore": Patterns(dense, append(int4, fp8...)),
		"kv_cache_scheme": nil, "sparsity_config": map[string]any{}, "global_compression_ratio": nil,
		"version": compressedTensorsVersion,
	}
	return c
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
