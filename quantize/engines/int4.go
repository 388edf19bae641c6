package engines

import (
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// The rules of INT4 routed experts: compressed-tensors pack-quantized group or channel weights,
// inputs not quantized, through the engines' WNA16 (Marlin) MoE methods.
func init() {
	registerExpertFormat(expertRules{
		format:   FormatInt4,
		describe: "INT4 weight-only (pack-quantized)",
		classify: func(w, in map[string]any) bool {
			bits, _ := rules.IntOf(w["num_bits"])
			typ, _ := w["type"].(string)
			return bits == 4 && typ == "int" && in == nil
		},
		tensors: (*checker).checkPackedInt4Tensors,
		moe: func(c *checker, m Module, s *scheme) Source {
			c.checkWNA16MoE(m, s)
			if c.e == VLLM {
				return srcVLLMMarlinMoE
			}
			return srcSGLCTMoE
		},
		support: []Support{
			{FormatInt4, SGLang, 80, 100, true, "CompressedTensorsWNA16MoEMethod: Marlin WNA16 MoE", "", srcSGLCTMoE.String()},
			{FormatInt4, VLLM, 80, 100, true, "CompressedTensorsWNA16MarlinMoEMethod: Marlin WNA16 MoE", "", srcVLLMMarlinMoE.String()},
		},
	})
}

// checkPackedInt4Tensors checks that checkpoint module p holds the pack-quantized INT4 tensors
// of scheme s: weight_packed I32 [n, k/8], weight_scale [n, k/group], weight_shape.
func (c *checker) checkPackedInt4Tensors(module, p string, s *scheme, target string, src Source) {
	pk, ok1 := c.byName[p+".weight_packed"]
	sc, ok2 := c.byName[p+".weight_scale"]
	_, ok3 := c.byName[p+".weight_shape"]
	if !ok1 || !ok2 || !ok3 {
		_, why := c.plain(p)
		if ok, _ := c.plain(p); ok {
			why = "holds a plain weight"
		}
		c.problem(module, "scheme-tensors", src, "not ignored, so it gets the %s scheme of %s (target %q), but %s %s: the load fails looking for weight_packed (add the module, as the engine names it, to the ignore list)", s.kind, s.group, target, p, why)
		return
	}
	if pk.DType != safetensors.I32 || len(pk.Shape) != 2 || len(sc.Shape) != 2 || sc.Shape[0] != pk.Shape[0] {
		c.problem(module, "scheme-tensors", src, "%s: INT4 tensors of the wrong dtype or shape (weight_packed %s %v, weight_scale %v)", p, pk.DType, pk.Shape, sc.Shape)
		return
	}
	k := pk.Shape[1] * 8
	if s.groupSize > 0 && (k%int64(s.groupSize) != 0 || sc.Shape[1] != k/int64(s.groupSize)) {
		c.problem(module, "scheme-tensors", src, "%s: weight_scale %v does not fit in features %d with group size %d", p, sc.Shape, k, s.groupSize)
	}
}

// checkWNA16MoE: INT4 experts through the engines' WNA16 (Marlin) MoE methods.
func (c *checker) checkWNA16MoE(m Module, s *scheme) {
	moeSrc := srcSGLCTMoE
	if c.e == VLLM {
		moeSrc = srcVLLMMarlinMoE
	}
	if !s.symmetric {
		c.problem(m.Name, "moe-symmetric", moeSrc, "INT4 experts with asymmetric weights: pdq's engines' WNA16 MoE path takes symmetric ones")
	}
	if s.strategy != "group" && s.strategy != "channel" {
		c.problem(m.Name, "moe-strategy", moeSrc, "INT4 strategy %q; the WNA16 MoE path takes group or channel", s.strategy)
	}
	g := s.groupSize
	if s.strategy == "channel" {
		g = -1
	}
	if g != -1 && g != 32 && g != 64 && g != 128 {
		c.problem(m.Name, "moe-group-size", srcVLLMMarlinMoE, "group size %d; the Marlin MoE kernel takes 32, 64, 128 or per channel", g)
	}
	hidden, _ := rules.ConfigInt(c.cfg, "hidden_size")
	inter, _ := rules.ConfigInt(c.cfg, "moe_intermediate_size")
	if hidden > 0 && hidden%128 != 0 {
		c.problem(m.Name, "moe-shape", srcVLLMMarlinMoE, "hidden_size %d is not a multiple of 128 (Marlin MoE)", hidden)
	}
	if inter > 0 {
		tp := int64(c.moeTP())
		q := int64(max(64, g))
		if inter%tp != 0 || (inter/tp)%q != 0 {
			c.problem(m.Name, "moe-shape", srcVLLMMarlinMoE, "moe_intermediate_size %d / TP %d is not a multiple of max(64, group size) = %d (Marlin MoE)", inter, tp, q)
		}
	}
}
