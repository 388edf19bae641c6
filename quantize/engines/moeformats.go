package engines

import (
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

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
			Problem: "routed experts " + describe(f) + " do not load on SM" + strconv.Itoa(c.o.SM) + ": " + why + " (" + needs(f, c.e) + ")"})
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
