package engines

import (
	"fmt"
	"slices"

	"pdq/safetensors"
)

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

// fp4Describe is a format for messages.
func fp4Describe(f Format) string {
	switch f {
	case FormatNVFP4:
		return "NVFP4 weight-only (nvfp4-pack-quantized, no input activations)"
	case FormatNVFP4A4:
		return "NVFP4 weights and activations"
	case FormatMXFP4:
		return "MXFP4 (mxfp4-pack-quantized)"
	case FormatW4AFP8:
		return "W4AFP8 (INT4 g128 weights, dynamic per-token FP8 inputs)"
	case FormatInt4:
		return "INT4 weight-only (pack-quantized)"
	}
	return fmt.Sprint(f)
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
