package engines

import (
	"strings"

	"pdq/quantize/rules"
)

// checkMoE checks one FusedMoE layer of a compressed-tensors checkpoint: one scheme for the gate,
// up and down projections of every expert, the constraints of the MoE method the engine picks for
// the experts' format (WNA16 Marlin for INT4, the FP4 and W4A8 methods, formats.go), whether the
// server's GPU loads that format (Options.SM), and the tensors of every expert.
func (c *checker) checkMoE(m Module, targets []string, byTarget map[string]*scheme) {
	moeSrc := srcSGLCTMoE
	if c.e == VLLM {
		moeSrc = srcVLLMMarlinMoE
	}
	var s *scheme
	var target string
	if g, ok := byTarget["Linear"]; ok {
		s, target = g, "Linear"
	} else {
		for _, p := range m.Parts {
			t, ok := FindTarget(p, "", targets, nil)
			if !ok {
				c.problem(m.Name, "moe-one-scheme", moeSrc, "expert projection %s matches no config-group target", p)
				return
			}
			if s != nil && byTarget[t] != s {
				c.problem(m.Name, "moe-one-scheme", moeSrc, "the experts' projections match different config groups (%s, %s): the engine needs one scheme for gate, up and down", s.group, byTarget[t].group)
				return
			}
			s, target = byTarget[t], t
		}
	}
	c.res.ExpertFormat = s.kind
	switch s.kind {
	case FormatInt4:
		c.checkWNA16MoE(m, s)
	case FormatW4AFP8:
		c.checkW4AFP8MoE(m, s)
		moeSrc = srcSGLW4AFP8MoE
		if c.e == VLLM {
			moeSrc = srcVLLMW4A8MoE
		}
	case FormatNVFP4, FormatNVFP4A4, FormatMXFP4:
		c.checkFP4MoE(m, s)
		moeSrc = c.fp4MoESource(s.kind)
	default:
		for _, p := range m.Parts {
			c.checkSchemeTensors(m.Name, p, s, target, moeSrc)
		}
		return
	}
	c.checkGPU(m.Name, s.kind)
	c.checkExperts(m, s, target, moeSrc)
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

// checkExperts checks that every expert is present with its three projections, each holding the
// tensors of scheme s.
func (c *checker) checkExperts(m Module, s *scheme, target string, moeSrc Source) {
	experts, parts := map[string]bool{}, map[string]bool{}
	for _, p := range m.Parts {
		parts[p] = true
		if i := strings.LastIndexByte(p, '.'); i > 0 {
			experts[p[:i]] = true
		}
		c.checkSchemeTensors(m.Name, p, s, target, moeSrc)
	}
	if n, ok := rules.ConfigInt(c.cfg, "n_routed_experts"); ok && int64(len(experts)) != n {
		c.problem(m.Name, "moe-experts", moeSrc, "%d experts present, config.json says n_routed_experts %d", len(experts), n)
	}
	for e := range experts {
		for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
			if !parts[e+"."+proj] {
				c.problem(m.Name, "moe-experts", moeSrc, "%s has no %s", e, proj)
			}
		}
	}
}
