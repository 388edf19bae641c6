package engines

import (
	"slices"
	"strings"

	"pdq/quantize/rules"
	"pdq/safetensors"
)

// The FP4 (E2M1) formats of routed experts, in compressed-tensors' nvfp4- and
// mxfp4-pack-quantized layouts (docs/FP4.md).
const (
	FormatNVFP4   Format = "nvfp4"      // NVFP4 weights (tensor_group, g16), inputs not quantized (NVFP4A16)
	FormatNVFP4A4 Format = "nvfp4-w4a4" // NVFP4 weights and NVFP4 inputs
	FormatMXFP4   Format = "mxfp4"      // MXFP4 weights (group 32); vLLM picks the scheme from the weights alone
)

// The engine files of the FP4 MoE and Linear schemes.
var (
	srcVLLMNVFP4MoE = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_w4a4_nvfp4.py",
		"7d6517c89eed5bcb7ac761efa691638189dba668"}
	srcVLLMNVFP4Oracle = Source{"vllm", "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
		"edd45a17c7e3cc39416f763b8b80614e96fc8576"}
	srcVLLMMXFP4MoE = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_w4a4_mxfp4.py",
		"cd5f1c27323b23471f438f12ea3e4eeca672c4a1"}
	srcVLLMW4A16NVFP4 = Source{"vllm", "vllm/model_executor/layers/quantization/compressed_tensors/schemes/compressed_tensors_w4a16_nvfp4.py",
		"17b6501a6ce929d83d4b5c1d408adf0ae4a610f8"}
	srcSGLNVFP4MoE = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4_moe.py",
		"2418a9655e433676f5ee4ef2ed5c2250243d164f"}
	srcSGLNVFP4A16MoE = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_w4a16_nvfp4_moe.py",
		"8f0d9876b19404df00b799bfb1ae627a5d17b9b1"}
	srcSGLMXFP4MoE = Source{"sglang", "python/sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_w4a16_mxfp4_moe.py",
		"aafdd5c57cabd445dac09a7ffdc0ce19f2f44110"}
)

// fp4Weights reports whether a config group's weights are 4-bit floats of strategy strategy and
// the given group size, symmetric: the shape of both FP4 formats' weights.
func fp4Weights(w map[string]any, strategy string, group int64) bool {
	bits, _ := rules.IntOf(w["num_bits"])
	typ, _ := w["type"].(string)
	st, _ := w["strategy"].(string)
	sym, _ := w["symmetric"].(bool)
	g, hasGroup := rules.IntOf(w["group_size"])
	return bits == 4 && typ == "float" && st == strategy && hasGroup && g == group && sym
}

func init() {
	fp4 := func(f Format, describe string, classify func(w, in map[string]any) bool, support []Support, sources ...Source) expertRules {
		return expertRules{format: f, describe: describe, classify: classify,
			tensors: (*checker).checkFP4Tensors, linear: (*checker).checkFusedGlobalScales,
			moe: func(c *checker, m Module, s *scheme) Source {
				c.checkFP4MoE(m, s)
				return c.fp4MoESource(s.kind)
			},
			width: func(Engine) (int, string) {
				return 64, string(f) + " experts (FP4 Marlin MoE)"
			},
			support: support, sources: sources}
	}
	registerExpertFormat(fp4(FormatNVFP4, "NVFP4 weight-only (nvfp4-pack-quantized, no input activations)",
		func(w, in map[string]any) bool { return in == nil && fp4Weights(w, "tensor_group", 16) },
		[]Support{
			{FormatNVFP4, SGLang, 80, 100, true, "CompressedTensorsW4A16Nvfp4MoE: FP4 Marlin MoE, weight-only (BF16 activations)",
				"a recent scheme (whether SGLang v0.5.18 has it was not checked): an SGLang without CompressedTensorsW4A16Nvfp4MoE has no weight-only NVFP4 MoE scheme and loads NVFP4A16 experts on no GPU",
				srcSGLNVFP4A16MoE.String()},
			{FormatNVFP4, VLLM, 80, 90, true, "CompressedTensorsW4A4Nvfp4MoEMethod(use_a16): select_nvfp4_moe_backend, Marlin FP4 MoE weight-only (BF16 activations)",
				"", srcVLLMNVFP4Oracle.String()},
			{FormatNVFP4, VLLM, 100, 100, true, "CompressedTensorsW4A4Nvfp4MoEMethod(use_a16): select_nvfp4_moe_backend, Marlin FP4 MoE weight-only (BF16 activations)",
				"the FlashInfer and CUTLASS FP4 backends are tried first; whether one of them takes BF16 activations here was not read", srcVLLMNVFP4Oracle.String()},
		}, srcVLLMNVFP4MoE, srcVLLMNVFP4Oracle, srcVLLMW4A16NVFP4, srcSGLNVFP4MoE, srcSGLNVFP4A16MoE))
	registerExpertFormat(fp4(FormatMXFP4, "MXFP4 (mxfp4-pack-quantized)",
		func(w, _ map[string]any) bool { return fp4Weights(w, "group", 32) },
		[]Support{
			{FormatMXFP4, SGLang, 80, 100, true, "CompressedTensorsW4A16Mxfp4MoE: FP4 Marlin MoE, weight-only",
				"a recent scheme (whether SGLang v0.5.18 has it was not checked), reached only when the model's FusedMoE opts out of the fused GPT-OSS MXFP4 method (serves_fused_mxfp4); not checked for the DeepSeek family",
				srcSGLMXFP4MoE.String()},
			{FormatMXFP4, VLLM, 80, 90, true, "CompressedTensorsW4A4Mxfp4MoEMethod: Marlin FP4 MoE, weight-only", "", srcVLLMMXFP4MoE.String()},
			{FormatMXFP4, VLLM, 100, 100, true, "CompressedTensorsW4A4Mxfp4MoEMethod: CutlassExpertsMxfp4 where the device has it, else Marlin",
				"with CutlassExpertsMxfp4 the activations are quantized to MXFP4 too, so what runs is not the weight-only model pdq measured", srcVLLMMXFP4MoE.String()},
		}, srcVLLMMXFP4MoE, srcSGLMXFP4MoE))
	registerExpertFormat(fp4(FormatNVFP4A4, "NVFP4 weights and activations",
		func(w, in map[string]any) bool {
			return in != nil && fp4Weights(w, "tensor_group", 16) && fp4Weights(in, "tensor_group", 16)
		},
		[]Support{
			{FormatNVFP4A4, SGLang, 80, 90, false, "CompressedTensorsW4A4Nvfp4MoE raises without Blackwell (is_blackwell_supported)",
				"newer SGLang serves it weight-only through CompressedTensorsW4A16Nvfp4MoE, its activation scales dropped", srcSGLNVFP4MoE.String()},
			{FormatNVFP4A4, SGLang, 100, 100, true, "CompressedTensorsW4A4Nvfp4MoE: FlashInfer TRT-LLM or CUTLASS FP4 MoE, NVFP4 activations", "", srcSGLNVFP4MoE.String()},
			{FormatNVFP4A4, VLLM, 80, 90, true, "CompressedTensorsW4A4Nvfp4MoEMethod: Marlin FP4 MoE, weight-only",
				"no FP4 tensor cores: the activation scales are dropped and the model runs as NVFP4A16", srcVLLMNVFP4Oracle.String()},
			{FormatNVFP4A4, VLLM, 100, 100, true, "CompressedTensorsW4A4Nvfp4MoEMethod: FlashInfer TRT-LLM, CuTe DSL or CUTLASS, or vLLM CUTLASS FP4 MoE", "", srcVLLMNVFP4Oracle.String()},
		}))
}

// fp4Tensor is one tensor an FP4 scheme registers for a Linear of n×k features.
type fp4Tensor struct {
	suffix string
	dtype  safetensors.DType
	shape  func(n, k int64) []int64
}

// fp4Tensors are the tensors the engines' FP4 schemes read per Linear (the MoE schemes register
// the same per expert, stacked): compressed-tensors' nvfp4- and mxfp4-pack-quantized layouts,
// docs/FP4.md. vLLM CompressedTensorsW4A16Fp4 / W4A4Nvfp4MoEMethod and SGLang
// CompressedTensorsW4A16Nvfp4MoE register weight_packed U8 [n, k/2], weight_scale F8_E4M3
// [n, k/16] and weight_global_scale F32 (one per partition); the W4A4 schemes also
// input_global_scale F32. The MXFP4 schemes register weight_packed and a U8 (E8M0) weight_scale
// [n, k/32], no global scale.
func fp4Tensors(f Format) []fp4Tensor {
	packed := fp4Tensor{"weight_packed", safetensors.U8, func(n, k int64) []int64 { return []int64{n, k / 2} }}
	one := func(n, k int64) []int64 { return []int64{1} }
	switch f {
	case FormatNVFP4, FormatNVFP4A4:
		ts := []fp4Tensor{packed,
			{"weight_scale", safetensors.F8E4M3, func(n, k int64) []int64 { return []int64{n, k / 16} }},
			{"weight_global_scale", safetensors.F32, one}}
		if f == FormatNVFP4A4 {
			ts = append(ts, fp4Tensor{"input_global_scale", safetensors.F32, one})
		}
		return ts
	case FormatMXFP4:
		return []fp4Tensor{packed,
			{"weight_scale", safetensors.U8, func(n, k int64) []int64 { return []int64{n, k / 32} }}}
	}
	return nil
}

// fp4Group is the group size of an FP4 format.
func fp4Group(f Format) int64 {
	if f == FormatMXFP4 {
		return 32
	}
	return 16
}

// checkFP4Tensors checks that checkpoint module p holds the tensors of FP4 scheme s, in their
// dtypes and shapes. The features k come from weight_packed; a scalar global scale of shape []
// is taken as [1] (the loaders copy one element either way).
func (c *checker) checkFP4Tensors(module, p string, s *scheme, target string, src Source) {
	pk, ok := c.byName[p+".weight_packed"]
	if !ok {
		why := "has no weight_packed"
		if plain, w := c.plain(p); plain {
			why = "holds a plain weight"
		} else if w != "" {
			why = w
		}
		c.problem(module, "scheme-tensors", src, "not ignored, so it gets the %s scheme of %s (target %q), but %s %s: the load fails looking for weight_packed (add the module, as the engine names it, to the ignore list)", s.kind, s.group, target, p, why)
		return
	}
	if pk.DType != safetensors.U8 || len(pk.Shape) != 2 {
		c.problem(module, "scheme-tensors", src, "%s: %s weight_packed is %s %v, want U8 [out, in/2] (two E2M1 codes per byte)", p, s.kind, pk.DType, pk.Shape)
		return
	}
	n, k := pk.Shape[0], pk.Shape[1]*2
	if g := fp4Group(s.kind); k%g != 0 {
		c.problem(module, "scheme-tensors", src, "%s: %d input features are not a multiple of the %s group %d", p, k, s.kind, g)
		return
	}
	for _, want := range fp4Tensors(s.kind)[1:] {
		t, ok := c.byName[p+"."+want.suffix]
		shape := want.shape(n, k)
		switch {
		case !ok:
			c.problem(module, "scheme-tensors", src, "%s: no %s, which the %s scheme reads (%s %v)", p, want.suffix, s.kind, want.dtype, shape)
		case t.DType != want.dtype:
			c.problem(module, "scheme-tensors", src, "%s: %s is %s, want %s", p, want.suffix, t.DType, want.dtype)
		case !slices.Equal(t.Shape, shape) && !(len(shape) == 1 && shape[0] == 1 && len(t.Shape) == 0):
			c.problem(module, "scheme-tensors", src, "%s: %s has shape %v, want %v", p, want.suffix, t.Shape, shape)
		}
	}
}

// checkFusedGlobalScales: vLLM's NVFP4 Linear scheme (CompressedTensorsW4A16Fp4, also the fallback
// of W4A4 without CUTLASS FP4) keeps one global scale for a fused Linear, the largest of its
// parts' (weight_global_scale.max()), so parts with different global scales are dequantized with
// the wrong one. Checked when the global scales were read (Input.GlobalScales); SGLang's NVFP4
// Linear scheme was not read.
func (c *checker) checkFusedGlobalScales(m Module, s *scheme) {
	if c.e != VLLM || (s.kind != FormatNVFP4 && s.kind != FormatNVFP4A4) || len(m.Parts) < 2 || c.in.GlobalScales == nil {
		return
	}
	first, ok := c.in.GlobalScales[m.Parts[0]+".weight_global_scale"]
	if !ok {
		return
	}
	for _, p := range m.Parts[1:] {
		if v, ok := c.in.GlobalScales[p+".weight_global_scale"]; ok && v != first {
			c.problem(m.Name, "fused-global-scale", srcVLLMW4A16NVFP4, "%s and %s have different weight_global_scale (%g, %g): vLLM fuses them into one Linear with the largest global scale, so the other part is dequantized with the wrong one; quantize the parts of a fused module with one global scale",
				m.Parts[0], p, first, v)
			return
		}
	}
}

// fp4MoESource is the engine file of the FP4 MoE scheme the engine picks for format f.
func (c *checker) fp4MoESource(f Format) Source {
	switch {
	case c.e == VLLM && f == FormatMXFP4:
		return srcVLLMMXFP4MoE
	case c.e == VLLM:
		return srcVLLMNVFP4MoE
	case f == FormatMXFP4:
		return srcSGLMXFP4MoE
	case f == FormatNVFP4A4 && (c.o.SM == 0 || c.o.SM >= 100):
		return srcSGLNVFP4MoE
	}
	return srcSGLNVFP4A16MoE
}

// checkFP4MoE: NVFP4 and MXFP4 experts. The weight-only paths run the FP4 Marlin MoE kernel, which
// needs hidden_size % 128 = 0 and an expert intermediate size per TP rank % 64 = 0 (SGLang's
// W4A16 NVFP4 and MXFP4 MoE schemes check both at load; vLLM's Marlin MoE, the same rule as for
// INT4 with max(64, 16 or 32) = 64). NVFP4 W4A4 on SM100 runs the FP4 tensor-core kernels
// instead, whose shape rules were not read. Gate and up of one expert must share their NVFP4
// global scale: both engines keep one per expert for the fused w13 GEMM, warn "w1_weight_global_scale
// must match w3_weight_global_scale" and use the gate's, so an up projection with its own scale
// is dequantized with the wrong one.
func (c *checker) checkFP4MoE(m Module, s *scheme) {
	src := c.fp4MoESource(s.kind)
	marlin := s.kind != FormatNVFP4A4 || (c.o.SM > 0 && c.o.SM < 100)
	if marlin {
		hidden, inter, perRank, ok := c.moeDims()
		if hidden > 0 && hidden%128 != 0 {
			c.problem(m.Name, "moe-shape", src, "hidden_size %d is not a multiple of 128 (FP4 Marlin MoE)", hidden)
		}
		if !ok || (perRank > 0 && perRank%64 != 0) {
			c.problem(m.Name, "moe-shape", src, "moe_intermediate_size %d / TP %d is not a multiple of 64 (FP4 Marlin MoE)", inter, c.moeTP())
		}
	}
	if s.kind == FormatMXFP4 || c.in.GlobalScales == nil {
		return
	}
	var differ []string
	for _, p := range m.Parts {
		if !strings.HasSuffix(p, ".gate_proj") {
			continue
		}
		e := strings.TrimSuffix(p, ".gate_proj")
		g, ok1 := c.in.GlobalScales[e+".gate_proj.weight_global_scale"]
		u, ok2 := c.in.GlobalScales[e+".up_proj.weight_global_scale"]
		if ok1 && ok2 && g != u {
			differ = append(differ, e)
		}
	}
	if len(differ) > 0 {
		src := srcSGLNVFP4A16MoE
		if c.e == VLLM {
			src = srcVLLMNVFP4MoE
		}
		c.problem(m.Name, "moe-global-scale", src, "%d expert(s) (first %s) have gate and up projections with different weight_global_scale: the engine keeps the gate's for both (fused w13), so the up projection is dequantized with the wrong scale; quantize gate and up with one global scale",
			len(differ), differ[0])
	}
}
