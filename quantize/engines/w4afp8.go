package engines

import "pdq/quantize/rules"

// FormatW4AFP8 is INT4 group weights with dynamic per-token FP8 inputs (W4A8 FP8), pack-quantized.
const FormatW4AFP8 Format = "w4afp8"

// The engine files of the W4A8 MoE schemes.
var (
	srcVLLMW4A8MoE = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_w4a8_fp8.py",
		"66b4b96ffa9c51fb898a626a633728a5b69f28da"}
	srcVLLMW4A8IntMoE = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_w4a8_int8.py",
		"78251204726d787a3c4a6d4d2e4ef27a257107cd"}
	srcSGLW4AFP8MoE = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_w4a8_fp8_moe.py",
		"7868ff16f4560d6dfcfbd23683b5ebe11e4cb775"}
)

// The rules of W4AFP8 routed experts: the INT4 pack-quantized tensors, the CUTLASS W4A8 MoE
// kernels of SM90.
func init() {
	registerExpertFormat(expertRules{
		format:   FormatW4AFP8,
		describe: "W4AFP8 (INT4 g128 weights, dynamic per-token FP8 inputs)",
		classify: func(w, in map[string]any) bool {
			bits, _ := rules.IntOf(w["num_bits"])
			typ, _ := w["type"].(string)
			strategy, _ := w["strategy"].(string)
			sym, _ := w["symmetric"].(bool)
			if bits != 4 || typ != "int" || in == nil {
				return false
			}
			ib, _ := rules.IntOf(in["num_bits"])
			it, _ := in["type"].(string)
			is, _ := in["strategy"].(string)
			idyn, _ := in["dynamic"].(bool)
			isym, _ := in["symmetric"].(bool)
			// vLLM _is_fp8_w4a8: group weights, per-token dynamic symmetric 8-bit inputs.
			return ib == 8 && it == "float" && is == "token" && idyn && isym && sym && strategy == "group"
		},
		tensors: (*checker).checkPackedInt4Tensors,
		moe: func(c *checker, m Module, s *scheme) Source {
			c.checkW4AFP8MoE(m, s)
			if c.e == VLLM {
				return srcVLLMW4A8MoE
			}
			return srcSGLW4AFP8MoE
		},
		width: func(e Engine) (int, string) {
			if e == VLLM {
				return 256, "W4AFP8 experts (vLLM's CUTLASS W4A8 MoE)"
			}
			return 128, "W4AFP8 experts (groups of 128)"
		},
		support: []Support{
			{FormatW4AFP8, SGLang, 80, 80, false, "CompressedTensorsW4AFP8MoE needs compute capability 90", "", srcSGLW4AFP8MoE.String()},
			{FormatW4AFP8, SGLang, 90, 90, true, "CompressedTensorsW4AFP8MoE: CUTLASS W4A8 MoE (cutlass_w4a8_moe, group 128 fixed), dynamic FP8 activations", "", srcSGLW4AFP8MoE.String()},
			{FormatW4AFP8, SGLang, 100, 100, false, "CompressedTensorsW4AFP8MoE: its minimum capability 90 admits SM100, but cutlass_w4a8_moe is a Hopper kernel",
				"not verified on SM100; taken as not loading", srcSGLW4AFP8MoE.String()},
			{FormatW4AFP8, VLLM, 80, 80, false, "the W4A8 FP8 scheme is picked on SM90 exactly (_is_fp8_w4a8_sm90); elsewhere the config falls to CompressedTensorsW4A8Int8MoEMethod, which raises \"CPU-only\" on a GPU", "", srcVLLMW4A8IntMoE.String()},
			{FormatW4AFP8, VLLM, 90, 90, true, "CompressedTensorsW4A8Fp8MoEMethod: CUTLASS W4A8 grouped GEMM, BF16 group scales turned to FP8 with per-channel F32 scales at load", "", srcVLLMW4A8MoE.String()},
			{FormatW4AFP8, VLLM, 100, 100, false, "the W4A8 FP8 scheme is picked on SM90 exactly (_is_fp8_w4a8_sm90); elsewhere the config falls to CompressedTensorsW4A8Int8MoEMethod, which raises \"CPU-only\" on a GPU", "", srcVLLMW4A8IntMoE.String()},
		},
		sources: []Source{srcVLLMW4A8MoE, srcVLLMW4A8IntMoE, srcSGLW4AFP8MoE},
	})
}

// checkW4AFP8MoE: INT4 g128 experts with dynamic FP8 inputs (symmetric weights and inputs, or the
// config is not W4AFP8 to the engines: formatOf). vLLM's CompressedTensorsW4A8Fp8MoEMethod asserts
// an actorder other than group, group size 128, and hidden_size and the expert intermediate size
// per TP rank divisible by 256 (CUTLASS reorder_tensor); SGLang's CompressedTensorsW4AFP8MoE
// asserts the pack-quantized format, and its cutlass_w4a8_moe has the group size fixed at 128.
func (c *checker) checkW4AFP8MoE(m Module, s *scheme) {
	src := srcSGLW4AFP8MoE
	if c.e == VLLM {
		src = srcVLLMW4A8MoE
	}
	if s.groupSize != 128 {
		c.problem(m.Name, "moe-group-size", src, "W4AFP8 experts of group size %d: the CUTLASS W4A8 MoE kernel takes 128 only", s.groupSize)
	}
	if c.e == SGLang && s.top != "pack-quantized" {
		c.problem(m.Name, "format", src, "W4AFP8 experts under the top-level format %q: SGLang's W4AFP8 MoE scheme asserts pack-quantized", s.top)
	}
	if c.e != VLLM {
		return
	}
	if s.actorder == "group" {
		c.problem(m.Name, "moe-actorder", src, "W4AFP8 experts with actorder group: the W4A8 MoE scheme refuses it")
	}
	hidden, inter, perRank, ok := c.moeDims()
	if hidden > 0 && hidden%256 != 0 {
		c.problem(m.Name, "moe-shape", src, "hidden_size %d is not a multiple of 256 (CUTLASS W4A8 MoE reorder)", hidden)
	}
	if !ok || (perRank > 0 && perRank%256 != 0) {
		c.problem(m.Name, "moe-shape", src, "moe_intermediate_size %d / TP %d is not a multiple of 256 (CUTLASS W4A8 MoE reorder); lower the TP of the experts or use EP", inter, c.moeTP())
	}
}
