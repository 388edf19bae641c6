// Package engines encodes, as code, the rules by which SGLang and vLLM load a checkpoint: the
// modules each engine builds for the model families pdq converts (DeepSeek-V3, Kimi K2, GLM-5,
// GLM-4.x), their fused names, how a compressed-tensors "ignore" list and config-group "targets"
// are matched against those modules, the scheme each module then gets and the tensors that scheme
// reads, the constraints of the MoE kernels, SGLang's shared-expert fusion, the modules the
// engines always build unquantized, the MTP layer loaded as a draft model, the FP8 block config
// of a prefill checkpoint, and the routed experts' decode formats (one file each, expertformats.go):
// the MoE scheme each engine picks, its kernels' rules, and on which GPU generations it loads
// (the format × engine × GPU table, SupportFor).
//
// Every rule names the engine source it was written from (file and commit, see Sources and
// docs/SERVING.md). Check reads config.json and tensor headers only, never tensor data.
package engines

// Engine names a serving engine.
type Engine string

// The engines whose rules pdq encodes.
const (
	SGLang Engine = "sglang"
	VLLM   Engine = "vllm"
)

// Engines lists them in the order reports use.
var Engines = []Engine{SGLang, VLLM}

// Source is one engine file a rule was written from, at the commit read.
type Source struct {
	Repo, Path, Commit string
}

// String is "repo path@commit12".
func (s Source) String() string { return s.Repo + " " + s.Path + "@" + s.Commit[:12] }

// The engine sources the rules were read from.
var (
	srcSGLUtils = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/utils.py",
		"4e75f4684b6b67cbb5a02b4106cf1b629d616dba"}
	srcSGLCT = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py",
		"b5535699b732af5d2e049cc5b70112718964b774"}
	srcSGLCTMoE = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_wNa16_moe.py",
		"b8e5a7c39773b60a4d1f77647b8fda1fee65bba1"}
	srcSGLDeepseek = Source{"sglang", "python/sglang/srt/models/deepseek_v2.py",
		"3e4a39ee73308590c5c753108bdcb8d333f7f1c6"}
	srcSGLGLM4 = Source{"sglang", "python/sglang/srt/models/glm4_moe.py",
		"005ffc65dc0f72d42a1436c31ef129ed98cccc58"}
	srcVLLMUtils = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/utils.py",
		"aff237f9631e22389f31aa81e58e6ae93ff02e70"}
	srcVLLMCT = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py",
		"be696453ee1bf3b7a2f652cc457b340d5a20c88c"}
	srcVLLMMarlinMoE = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_wna16_marlin.py",
		"483186f376deaa4ccb04898c50dff91ab6c980c0"}
	srcVLLMGLM4 = Source{"vllm", "vllm/model_executor/models/glm4_moe.py",
		"a4cd9d0d28bdb41db8dfe0acdafac2bf2f608630"}
	srcVLLMDeepseek = Source{"vllm", "vllm/model_executor/models/deepseek_v2.py",
		"b863fe5bf4e19680572603b4e166faefc5725551"}
	srcSGLNextN = Source{"sglang", "python/sglang/srt/models/deepseek_nextn.py",
		"c28bdc9012d29bed6b96688a44d6788157ef3d86"}
	srcVLLMMTP = Source{"vllm", "vllm/model_executor/models/deepseek_mtp.py",
		"4f7c14402630b97c8c078523fca8edef287ed2cf"}

	// The MoE scheme selection of the decode formats (FP4.md, SERVING.md "Decode formats and
	// GPUs"); each format's own schemes are cited in its file (expertRules.sources).
	srcVLLMCTMoESel = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe.py",
		"8a95a6886a14cbf40e1273ccc7c02df7b73c2e2f"}
)

// Sources lists every source file the rules cite, for documentation.
func Sources() []Source {
	srcs := []Source{srcSGLUtils, srcSGLCT, srcSGLCTMoE, srcSGLDeepseek, srcSGLGLM4,
		srcVLLMUtils, srcVLLMCT, srcVLLMMarlinMoE, srcVLLMDeepseek, srcVLLMGLM4, srcSGLNextN, srcVLLMMTP,
		srcVLLMCTMoESel}
	for _, r := range expertFormats {
		srcs = append(srcs, r.sources...)
	}
	return srcs
}
