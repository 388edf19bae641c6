package engines

import (
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

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

// moeDims are the MoE layer's hidden size and expert intermediate size per TP rank (0 when
// config.json lacks them; perRank is then 0 too, and ok false when TP does not divide it).
func (c *checker) moeDims() (hidden, inter, perRank int64, ok bool) {
	hidden, _ = rules.ConfigInt(c.cfg, "hidden_size")
	inter, _ = rules.ConfigInt(c.cfg, "moe_intermediate_size")
	tp := int64(c.moeTP())
	if inter <= 0 || inter%tp != 0 {
		return hidden, inter, 0, inter <= 0
	}
	return hidden, inter, inter / tp, true
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

// checkGPU applies the format × engine × GPU table to the routed experts when the server's GPU
// is known.
func (c *checker) checkGPU(module string, f Format) {
	if c.o.SM <= 0 {
		return
	}
	s, ok := SupportFor(f, c.e, c.o.SM)
	switch {
	case !ok:
		c.problem(module, "gpu", srcVLLMCTMoESel, "no rule for %s experts on SM%d in pdq's table (it covers SM80, SM90, SM100)", f, c.o.SM)
	case !s.Loads:
		why := s.Path
		if s.Note != "" {
			why += "; " + s.Note
		}
		c.res.Problems = append(c.res.Problems, Finding{Engine: c.e, Module: module, Rule: "gpu", Source: s.Source,
			Problem: "routed experts " + fp4Describe(f) + " do not load on SM" + strconv.Itoa(c.o.SM) + ": " + why + " (" + needs(f, c.e) + ")"})
	}
}

// needs says on which generations engine e loads format f, for messages.
func needs(f Format, e Engine) string {
	var on []string
	for _, g := range Generations {
		if s, ok := SupportFor(f, e, g.SM); ok && s.Loads {
			on = append(on, g.String())
		}
	}
	if on == nil {
		return "no GPU in pdq's table"
	}
	return "loads on " + strings.Join(on, ", ")
}
