package rules

import (
	"fmt"
	"sort"

	"pdq/internal/floatcodec"
	"pdq/safetensors"
)

// SourceLayout is how a checkpoint stores its Linear weights (FORMATS.md §2 and §4).
type SourceLayout string

// The layouts pdq recognises.
const (
	LayoutDense    SourceLayout = "dense"                  // BF16/F16/F32 weights
	LayoutFP8Block SourceLayout = "fp8-block"              // F8_E4M3 weight + F32 weight_scale_inv per 128x128 block
	LayoutCTFP8    SourceLayout = "compressed-tensors-fp8" // F8_E4M3 weight + weight_scale per channel or block
	LayoutCTInt4   SourceLayout = "compressed-tensors-int4"
	// LayoutCTNVFP4, LayoutCTMXFP4 and LayoutModelOptNVFP4 are the already-quantized FP4 layouts
	// of docs/FP4.md: their packed weights decode exactly to float.
	LayoutCTNVFP4       SourceLayout = "compressed-tensors-nvfp4"
	LayoutCTMXFP4       SourceLayout = "compressed-tensors-mxfp4"
	LayoutModelOptNVFP4 SourceLayout = "modelopt-nvfp4"
)

// Detected describes a source checkpoint's layout.
type Detected struct {
	Layout SourceLayout `json:"layout"`
	// DenseDType is the dtype holding most bytes of 2-D weights that are not FP8 (BF16 for FP8
	// checkpoints, whose embeddings and head stay BF16).
	DenseDType safetensors.DType `json:"dense_dtype"`
	// BlockSize is the FP8 block shape from config.json's weight_block_size, when given.
	BlockSize []int `json:"block_size,omitempty"`
	// ScaleFmt is config.json's scale_fmt ("ue8m0": power-of-two scales), when given.
	ScaleFmt string `json:"scale_fmt,omitempty"`
	// QuantMethod is config.json's quantization_config.quant_method, when given.
	QuantMethod string `json:"quant_method,omitempty"`
}

// FP8 reports an FP8 source (DeepSeek blocks or compressed-tensors FP8): its prefill output is
// the source itself.
func (d Detected) FP8() bool { return d.Layout == LayoutFP8Block || d.Layout == LayoutCTFP8 }

// String names the layout for people: "dense BF16", "FP8 block 128x128", ...
func (d Detected) String() string {
	switch d.Layout {
	case LayoutDense:
		return "dense " + string(d.DenseDType)
	case LayoutFP8Block:
		if len(d.BlockSize) == 2 {
			return fmt.Sprintf("FP8 block %dx%d", d.BlockSize[0], d.BlockSize[1])
		}
		return "FP8 block"
	case LayoutCTFP8:
		return "compressed-tensors FP8"
	case LayoutCTInt4:
		return "compressed-tensors INT4"
	case LayoutCTNVFP4:
		return "compressed-tensors NVFP4"
	case LayoutCTMXFP4:
		return "compressed-tensors MXFP4"
	case LayoutModelOptNVFP4:
		return "ModelOpt NVFP4"
	}
	return string(d.Layout)
}

// Detect infers the layout from tensor names and dtypes, with config.json's quantization_config
// (cfg may be nil) for the block size and scale format.
func Detect(ts []*safetensors.Tensor, cfg map[string]any) Detected {
	names := make(map[string]bool, len(ts))
	for _, t := range ts {
		names[t.Name] = true
	}
	var d Detected
	denseBytes := map[safetensors.DType]int64{}
	var fp8Block, ctFP8 bool
	packed := SourceLayout("")
	for _, t := range ts {
		module, suffix := ModuleOf(t.Name)
		switch {
		case suffix == "weight_packed" && (packed == "" || packed == LayoutCTInt4):
			packed = packedLayout(t.DType, names[module+".weight_global_scale"])
		case suffix == "weight" && t.DType == safetensors.U8 && names[module+".weight_scale_2"]:
			packed = LayoutModelOptNVFP4
		case suffix == "weight" && t.DType == safetensors.F8E4M3:
			if names[module+".weight_scale_inv"] {
				fp8Block = true
			} else if names[module+".weight_scale"] {
				ctFP8 = true
			}
		case suffix == "weight" && len(t.Shape) == 2 && t.DType.IsFloat():
			denseBytes[t.DType] += t.ByteSize()
		}
	}
	switch {
	case packed != "":
		d.Layout = packed
	case fp8Block:
		d.Layout = LayoutFP8Block
	case ctFP8:
		d.Layout = LayoutCTFP8
	default:
		d.Layout = LayoutDense
	}
	dts := make([]safetensors.DType, 0, len(denseBytes))
	for dt := range denseBytes {
		dts = append(dts, dt)
	}
	sort.Slice(dts, func(i, j int) bool {
		if denseBytes[dts[i]] != denseBytes[dts[j]] {
			return denseBytes[dts[i]] > denseBytes[dts[j]]
		}
		return dts[i] < dts[j]
	})
	if len(dts) > 0 {
		d.DenseDType = dts[0]
	}
	if qc := QuantizationConfig(cfg); qc != nil {
		d.QuantMethod, _ = qc["quant_method"].(string)
		d.ScaleFmt, _ = qc["scale_fmt"].(string)
		if bs, ok := qc["weight_block_size"].([]any); ok && len(bs) == 2 {
			for _, v := range bs {
				if n, ok := IntOf(v); ok {
					d.BlockSize = append(d.BlockSize, int(n))
				}
			}
		}
	}
	if d.Layout == LayoutFP8Block && d.BlockSize == nil {
		d.BlockSize = []int{floatcodec.FP8Block, floatcodec.FP8Block}
	}
	return d
}

// packedLayout is the layout of a weight_packed tensor of dtype dt: INT4 words, or FP4 codes
// with (NVFP4) or without (MXFP4) a global scale. A checkpoint with both INT4 and FP4 modules
// is named after its FP4 ones.
func packedLayout(dt safetensors.DType, global bool) SourceLayout {
	switch {
	case dt != safetensors.U8:
		return LayoutCTInt4
	case global:
		return LayoutCTNVFP4
	}
	return LayoutCTMXFP4
}

// Packed reports a source whose Linear weights arrive already quantized in a packed layout
// (compressed-tensors INT4, NVFP4 or MXFP4, ModelOpt NVFP4).
func (d Detected) Packed() bool {
	switch d.Layout {
	case LayoutCTInt4, LayoutCTNVFP4, LayoutCTMXFP4, LayoutModelOptNVFP4:
		return true
	}
	return false
}

// ModelSummary is the part of config.json people want to see first.
type ModelSummary struct {
	ModelType       string   `json:"model_type,omitempty"`
	Architectures   []string `json:"architectures,omitempty"`
	Hidden          int      `json:"hidden_size,omitempty"`
	Layers          int      `json:"num_hidden_layers,omitempty"`
	DenseLayers     int      `json:"first_k_dense_replace,omitempty"`
	MoEIntermediate int      `json:"moe_intermediate_size,omitempty"`
	Experts         int      `json:"n_routed_experts,omitempty"`
	SharedExperts   int      `json:"n_shared_experts,omitempty"`
	ExpertsPerTok   int      `json:"num_experts_per_tok,omitempty"`
	MTPLayers       int      `json:"num_nextn_predict_layers,omitempty"`
	Vocab           int      `json:"vocab_size,omitempty"`
}

// Summarize extracts the ModelSummary from a parsed config.json (nil gives the zero summary).
func Summarize(cfg map[string]any) ModelSummary {
	num := func(k string) int {
		n, _ := ConfigInt(cfg, k)
		return int(n)
	}
	s := ModelSummary{
		Hidden: num("hidden_size"), Layers: num("num_hidden_layers"), DenseLayers: num("first_k_dense_replace"),
		MoEIntermediate: num("moe_intermediate_size"), Experts: num("n_routed_experts"),
		SharedExperts: num("n_shared_experts"), ExpertsPerTok: num("num_experts_per_tok"),
		MTPLayers: num("num_nextn_predict_layers"), Vocab: num("vocab_size"),
	}
	s.ModelType, _ = cfg["model_type"].(string)
	if a, ok := cfg["architectures"].([]any); ok {
		for _, v := range a {
			if str, ok := v.(string); ok {
				s.Architectures = append(s.Architectures, str)
			}
		}
	}
	if s.Experts == 0 {
		s.Experts = num("num_experts") // Qwen-style names
	}
	return s
}
