package engines

import (
	"strings"

	"pdq/quantize/rules"
)

// checkMoE checks one FusedMoE layer of a compressed-tensors checkpoint: one scheme for the gate,
// up and down projections of every expert, the constraints of the MoE method the engine picks for
// the experts' format (their rules' moe, expertformats.go), whether the
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
	r := rulesOf(s.kind)
	if r == nil {
		for _, p := range m.Parts {
			c.checkSchemeTensors(m.Name, p, s, target, moeSrc)
		}
		return
	}
	moeSrc = r.moe(c, m, s)
	c.checkGPU(m.Name, s.kind)
	c.checkExperts(m, s, target, moeSrc)
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
