package convert

import (
	"fmt"
	"strings"

	"pdq/quantize"
	"pdq/quantize/engines"
	"pdq/quantize/report"
	"pdq/quantize/rules"
)

// w4afp8Encoding is W4AFP8 (docs/FP4.md): INT4 pack-quantized tensors in groups of
// quantize.W4AFP8GroupSize (Options.GroupSize is that), whose config group also declares dynamic
// per-token FP8 input activations, for vLLM's W4A8 kernels on SM90. It refuses the shapes those
// kernels refuse (ErrW4AFP8Shape).
type w4afp8Encoding struct{}

// DecodeW4AFP8 is INT4 g128 with dynamic FP8 activations (vLLM's SM90 W4A8), and SchemeW4AFP8
// its scheme: INT4 g128 symmetric weights with dynamic per-token FP8 activations.
const (
	DecodeW4AFP8 DecodeFormat = "w4afp8"
	SchemeW4AFP8 Scheme       = "w4afp8"
)

func init() {
	register(w4afp8Encoding{})
	registerFormat(FormatInfo{
		Format: DecodeW4AFP8, Title: "W4AFP8", Scheme: SchemeW4AFP8, FixedGroup: quantize.W4AFP8GroupSize,
		Layout:  "INT4 g128 declaring dynamic per-token FP8 activations",
		GPUs:    "the W4A8 kernels, SM90 (Hopper) only; shapes they refuse are refused",
		Engine:  engines.FormatW4AFP8,
		Report:  report.Info(SchemeInt4), // INT4 g128 tensors
		Tensors: int4Tensors,
		Refusal: ErrW4AFP8Shape, RefusedBy: "vLLM's W4A8 kernels",
		widthRule: func(*Options) (string, int) {
			return "decode W4AFP8", 256 // vLLM's W4A8 MoE kernels (quantize.CheckW4AFP8Experts)
		},
	}, 30)
}

// ErrW4AFP8Shape: a module's shape is one vLLM's W4A8 kernels refuse (it wraps ErrUnsupported).
var ErrW4AFP8Shape = fmt.Errorf("%w: shape outside vLLM's W4A8 FP8 kernels", ErrUnsupported)

func (w4afp8Encoding) Scheme() Scheme { return SchemeW4AFP8 }

func (w4afp8Encoding) Bind(m *Module, kind OutputKind, o *Options) Bound {
	return &int4Bound{scheme: SchemeW4AFP8, m: m, kind: kind, o: o, group: o.group(m.Cols), weights: quantize.W4AFP8Weights}
}

func (w4afp8Encoding) refusal() error { return ErrW4AFP8Shape }

// unfit: INT4's rules, then the kernels' (the whole, unsplit shapes; the tensor-parallel split
// is the planner's): routed experts need hidden and intermediate sizes divisible by 256, any
// other Linear in and out features divisible by 128.
func (w4afp8Encoding) unfit(m *Module, o *Options) string {
	if why := (int4Encoding{}).unfit(m, o); why != "" {
		return why
	}
	var err error
	if m.Role == rules.RoleRoutedExpert {
		hidden, inter := m.Cols, m.Rows // gate, up: [inter, hidden]
		if isDown(m.Name) {
			hidden, inter = m.Rows, m.Cols
		}
		err = quantize.CheckW4AFP8Experts(hidden, inter)
	} else {
		err = quantize.CheckW4AFP8Linear(m.Cols, m.Rows)
	}
	if err != nil {
		// The rule without the package prefix and the sentinel's words.
		why := strings.TrimPrefix(err.Error(), "quantize: ")
		return strings.TrimSuffix(why, ": "+quantize.ErrBadShape.Error())
	}
	return ""
}

// isDown reports a down projection (w2 in DeepSeek's original naming).
func isDown(name string) bool {
	return strings.HasSuffix(name, ".down_proj") || strings.HasSuffix(name, ".w2")
}

// ctGroup is llm-compressor's W4AFP8 group saved as pack-quantized, as vLLM's
// CompressedTensorsW4A8Fp8 loads it (docs/FP4.md).
func (w4afp8Encoding) ctGroup(*Options) (key, format string, group map[string]any) {
	return "w4afp8", "pack-quantized", map[string]any{
		"format": "pack-quantized",
		"weights": map[string]any{
			"num_bits": 4, "type": "int", "symmetric": true, "group_size": quantize.W4AFP8GroupSize, "strategy": "group",
			"block_structure": nil, "dynamic": false, "actorder": nil, "scale_dtype": nil, "zp_dtype": nil,
			"observer": "minmax", "observer_kwargs": map[string]any{},
		},
		"input_activations": map[string]any{
			"num_bits": 8, "type": "float", "symmetric": true, "group_size": nil, "strategy": "token",
			"block_structure": nil, "dynamic": true, "actorder": nil, "scale_dtype": nil, "zp_dtype": nil,
			"observer": nil, "observer_kwargs": map[string]any{},
		},
		"output_activations": nil,
	}
}

// readGroup recognises the W4AFP8 group: INT4 weights with FP8 input activations.
func (w4afp8Encoding) readGroup(g map[string]any, o *Options) bool {
	w, _ := g["weights"].(map[string]any)
	a, _ := g["input_activations"].(map[string]any)
	if w == nil || a == nil || w["type"] != "int" || a["type"] != "float" {
		return false
	}
	if bits, _ := rules.IntOf(a["num_bits"]); bits != 8 {
		return false
	}
	o.DecodeFormat = DecodeW4AFP8
	return true
}
