package engines

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

// Format is what one compressed-tensors config group makes of a Linear's weights and inputs, as
// the engines' scheme selection tells the cases apart (vLLM compressed_tensors.py
// _get_scheme_from_parts and compressed_tensors_moe.py get_moe_method; SGLang's get_moe_scheme).
type Format string

// The formats. FormatInt4, FormatFP8Block and FormatOther are also the scheme kinds Check knew
// before the FP4 formats.
const (
	FormatInt4     Format = "int4"       // INT4 group or channel weights, inputs not quantized (WNA16, pack-quantized)
	FormatW4AFP8   Format = "w4afp8"     // INT4 group weights with dynamic per-token FP8 inputs (W4A8 FP8)
	FormatNVFP4    Format = "nvfp4"      // NVFP4 weights (tensor_group, g16), inputs not quantized (NVFP4A16)
	FormatNVFP4A4  Format = "nvfp4-w4a4" // NVFP4 weights and NVFP4 inputs
	FormatMXFP4    Format = "mxfp4"      // MXFP4 weights (group 32); vLLM picks the scheme from the weights alone
	FormatFP8Block Format = "fp8-block"  // FP8 weights in blocks
	FormatOther    Format = "other"      // anything else: a scheme pdq does not check
)

// formatOf classifies a config group's weights and input_activations (nil for none).
func formatOf(w, in map[string]any) Format {
	bits, _ := rules.IntOf(w["num_bits"])
	typ, _ := w["type"].(string)
	strategy, _ := w["strategy"].(string)
	sym, _ := w["symmetric"].(bool)
	group, hasGroup := rules.IntOf(w["group_size"])
	switch {
	case bits == 4 && typ == "int" && in == nil:
		return FormatInt4
	case bits == 4 && typ == "int":
		ib, _ := rules.IntOf(in["num_bits"])
		it, _ := in["type"].(string)
		is, _ := in["strategy"].(string)
		idyn, _ := in["dynamic"].(bool)
		isym, _ := in["symmetric"].(bool)
		// vLLM _is_fp8_w4a8: group weights, per-token dynamic symmetric 8-bit inputs.
		if ib == 8 && it == "float" && is == "token" && idyn && isym && sym && strategy == "group" {
			return FormatW4AFP8
		}
	case bits == 4 && typ == "float" && strategy == "tensor_group" && hasGroup && group == 16 && sym:
		if in == nil {
			return FormatNVFP4
		}
		if formatOf(in, nil) == FormatNVFP4 {
			return FormatNVFP4A4
		}
	case bits == 4 && typ == "float" && strategy == "group" && hasGroup && group == 32 && sym:
		return FormatMXFP4
	case bits == 8 && typ == "float" && strategy == "block":
		if bs, ok := w["block_structure"].([]any); ok && len(bs) == 2 {
			return FormatFP8Block
		}
	}
	return FormatOther
}

// Generation is a GPU generation the support table covers, by CUDA compute capability.
type Generation struct {
	Name string `json:"name"` // "Hopper"
	SM   int    `json:"sm"`   // 90
	GPUs string `json:"gpus"` // "H100, H200"
}

// String is "Hopper SM90 (H100, H200)".
func (g Generation) String() string { return fmt.Sprintf("%s SM%d (%s)", g.Name, g.SM, g.GPUs) }

// Generations are the GPU generations of the support table, oldest first.
var Generations = []Generation{
	{"Ampere", 80, "A100"},
	{"Hopper", 90, "H100, H200"},
	{"Blackwell", 100, "B200, GB200"},
}

// gpuSM maps GPU names to their compute capability.
var gpuSM = map[string]int{"a100": 80, "h100": 90, "h200": 90, "h20": 90, "b200": 100, "gb200": 100, "b300": 100, "gb300": 100}

// ErrUnknownGPU: a GPU name or compute capability the support table does not cover.
var ErrUnknownGPU = errors.New("unknown GPU")

// ParseGPU reads a GPU name (a100, h100, h200, b200, gb200, ...), "sm90" or "90" and returns its
// generation. The error wraps ErrUnknownGPU.
func ParseGPU(s string) (Generation, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	sm, ok := gpuSM[t]
	if !ok {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "sm"))
		if err != nil {
			return Generation{}, fmt.Errorf("%w: %q (known: a100, h100, h200, b200, gb200, or sm80, sm90, sm100)", ErrUnknownGPU, s)
		}
		sm = n
	}
	for _, g := range Generations {
		if g.SM == sm {
			return g, nil
		}
	}
	return Generation{}, fmt.Errorf("%w: SM%d is not one of the generations the engine rules cover (SM80, SM90, SM100)", ErrUnknownGPU, sm)
}

// Support is one cell of the format × engine × GPU table: whether the engine loads routed experts
// of the format on GPUs of compute capability MinSM to MaxSM, and through which scheme and kernel.
type Support struct {
	Format Format `json:"format"`
	Engine Engine `json:"engine"`
	MinSM  int    `json:"min_sm"`
	MaxSM  int    `json:"max_sm"`
	Loads  bool   `json:"loads"`
	// Path is the scheme class the engine picks and the kernel it runs (or why it refuses).
	Path string `json:"path"`
	// Note is what to know beyond loads / does not (a newer engine needed, activations
	// quantized where the checkpoint did not measure them).
	Note   string `json:"note,omitempty"`
	Source string `json:"source"`
}

// SupportFor returns the cell of the table for routed experts of format f, engine e and compute
// capability sm; ok is false when the table has none (a format or GPU it does not cover).
func SupportFor(f Format, e Engine, sm int) (s Support, ok bool) {
	for _, r := range supportTable {
		if r.Format == f && r.Engine == e && sm >= r.MinSM && sm <= r.MaxSM {
			return r, true
		}
	}
	return Support{}, false
}

// SupportTable lists the table's cells per generation: for each format it covers, engine and
// generation, one Support (its MinSM and MaxSM the generation's).
func SupportTable(f Format) []Support {
	var out []Support
	for _, e := range Engines {
		for _, g := range Generations {
			if s, ok := SupportFor(f, e, g.SM); ok {
				s.MinSM, s.MaxSM = g.SM, g.SM
				out = append(out, s)
			}
		}
	}
	return out
}

// SupportedFormats lists the formats the table covers.
var SupportedFormats = []Format{FormatInt4, FormatNVFP4, FormatMXFP4, FormatW4AFP8, FormatNVFP4A4}

// supportTable is the format × engine × GPU table of routed experts (FusedMoE layers): one row per
// range of compute capabilities, each citing the engine file it was read in.
var supportTable = []Support{
	{FormatInt4, SGLang, 80, 100, true, "CompressedTensorsWNA16MoEMethod: Marlin WNA16 MoE", "", srcSGLCTMoE.String()},
	{FormatInt4, VLLM, 80, 100, true, "CompressedTensorsWNA16MarlinMoEMethod: Marlin WNA16 MoE", "", srcVLLMMarlinMoE.String()},

	{FormatNVFP4, SGLang, 80, 100, true, "CompressedTensorsW4A16Nvfp4MoE: FP4 Marlin MoE, weight-only (BF16 activations)",
		"a recent scheme (whether SGLang v0.5.18 has it was not checked): an SGLang without CompressedTensorsW4A16Nvfp4MoE has no weight-only NVFP4 MoE scheme and loads NVFP4A16 experts on no GPU",
		srcSGLNVFP4A16MoE.String()},
	{FormatNVFP4, VLLM, 80, 90, true, "CompressedTensorsW4A4Nvfp4MoEMethod(use_a16): select_nvfp4_moe_backend, Marlin FP4 MoE weight-only (BF16 activations)",
		"", srcVLLMNVFP4Oracle.String()},
	{FormatNVFP4, VLLM, 100, 100, true, "CompressedTensorsW4A4Nvfp4MoEMethod(use_a16): select_nvfp4_moe_backend, Marlin FP4 MoE weight-only (BF16 activations)",
		"the FlashInfer and CUTLASS FP4 backends are tried first; whether one of them takes BF16 activations here was not read", srcVLLMNVFP4Oracle.String()},

	{FormatNVFP4A4, SGLang, 80, 90, false, "CompressedTensorsW4A4Nvfp4MoE raises without Blackwell (is_blackwell_supported)",
		"newer SGLang serves it weight-only through CompressedTensorsW4A16Nvfp4MoE, its activation scales dropped", srcSGLNVFP4MoE.String()},
	{FormatNVFP4A4, SGLang, 100, 100, true, "CompressedTensorsW4A4Nvfp4MoE: FlashInfer TRT-LLM or CUTLASS FP4 MoE, NVFP4 activations", "", srcSGLNVFP4MoE.String()},
	{FormatNVFP4A4, VLLM, 80, 90, true, "CompressedTensorsW4A4Nvfp4MoEMethod: Marlin FP4 MoE, weight-only",
		"no FP4 tensor cores: the activation scales are dropped and the model runs as NVFP4A16", srcVLLMNVFP4Oracle.String()},
	{FormatNVFP4A4, VLLM, 100, 100, true, "CompressedTensorsW4A4Nvfp4MoEMethod: FlashInfer TRT-LLM, CuTe DSL or CUTLASS, or vLLM CUTLASS FP4 MoE", "", srcVLLMNVFP4Oracle.String()},

	{FormatMXFP4, SGLang, 80, 100, true, "CompressedTensorsW4A16Mxfp4MoE: FP4 Marlin MoE, weight-only",
		"a recent scheme (whether SGLang v0.5.18 has it was not checked), reached only when the model's FusedMoE opts out of the fused GPT-OSS MXFP4 method (serves_fused_mxfp4); not checked for the DeepSeek family",
		srcSGLMXFP4MoE.String()},
	{FormatMXFP4, VLLM, 80, 90, true, "CompressedTensorsW4A4Mxfp4MoEMethod: Marlin FP4 MoE, weight-only", "", srcVLLMMXFP4MoE.String()},
	{FormatMXFP4, VLLM, 100, 100, true, "CompressedTensorsW4A4Mxfp4MoEMethod: CutlassExpertsMxfp4 where the device has it, else Marlin",
		"with CutlassExpertsMxfp4 the activations are quantized to MXFP4 too, so what runs is not the weight-only model pdq measured", srcVLLMMXFP4MoE.String()},

	{FormatW4AFP8, SGLang, 80, 80, false, "CompressedTensorsW4AFP8MoE needs compute capability 90", "", srcSGLW4AFP8MoE.String()},
	{FormatW4AFP8, SGLang, 90, 90, true, "CompressedTensorsW4AFP8MoE: CUTLASS W4A8 MoE (cutlass_w4a8_moe, group 128 fixed), dynamic FP8 activations", "", srcSGLW4AFP8MoE.String()},
	{FormatW4AFP8, SGLang, 100, 100, false, "CompressedTensorsW4AFP8MoE: its minimum capability 90 admits SM100, but cutlass_w4a8_moe is a Hopper kernel",
		"not verified on SM100; taken as not loading", srcSGLW4AFP8MoE.String()},
	{FormatW4AFP8, VLLM, 80, 80, false, "the W4A8 FP8 scheme is picked on SM90 exactly (_is_fp8_w4a8_sm90); elsewhere the config falls to CompressedTensorsW4A8Int8MoEMethod, which raises \"CPU-only\" on a GPU", "", srcVLLMW4A8IntMoE.String()},
	{FormatW4AFP8, VLLM, 90, 90, true, "CompressedTensorsW4A8Fp8MoEMethod: CUTLASS W4A8 grouped GEMM, BF16 group scales turned to FP8 with per-channel F32 scales at load", "", srcVLLMW4A8MoE.String()},
	{FormatW4AFP8, VLLM, 100, 100, false, "the W4A8 FP8 scheme is picked on SM90 exactly (_is_fp8_w4a8_sm90); elsewhere the config falls to CompressedTensorsW4A8Int8MoEMethod, which raises \"CPU-only\" on a GPU", "", srcVLLMW4A8IntMoE.String()},
}
