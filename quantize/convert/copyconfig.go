package convert

import (
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// copyOutput is the prefill output of an FP8 source: its shard files unchanged. Its config.json
// is the source's (or --config's) as written, unless that has no quantization_config while the
// weights are FP8 blocks: both engines then build every layer unquantized and read the FP8 codes
// as values (vLLM refuses the weight_scale_inv tensors), so the output gets the DeepSeek-style FP8
// block quantization_config, with the Linears the source keeps in BF16 as ignored_layers.
func (p *Plan) copyOutput() *Output {
	out := &Output{Kind: KindPrefill, CopySource: true, Config: p.Config}
	if _, ok := p.Config["quantization_config"]; ok || rules.QuantizationConfig(p.Config) != nil || p.Config == nil || p.Layout.Layout != rules.LayoutFP8Block {
		return out
	}
	c := cloneConfig(p.Config)
	qc := map[string]any{
		"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
		"weight_block_size": []int{FP8BlockSize, FP8BlockSize},
	}
	var dense []string
	for _, m := range p.Modules {
		if m.Linear && m.Weight.DType != safetensors.F8E4M3 {
			dense = append(dense, m.Name)
		}
	}
	if len(dense) > 0 {
		qc["ignored_layers"] = dense
	}
	setQuantConfig(c, qc)
	out.Config, out.WriteConfig = c, true
	return out
}
