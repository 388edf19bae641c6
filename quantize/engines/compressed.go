package engines

import (
	"sort"

	"pdq/quantize/rules"
	"pdq/safetensors"
)

// scheme is one config group of a compressed-tensors quantization_config.
type scheme struct {
	group     string
	kind      Format // what the group's weights and input_activations make (formatOf)
	actorder  string
	format    string // the group's format, else the top-level one
	top       string // the top-level format
	symmetric bool
	strategy  string
	groupSize int   // -1 for channel
	block     []int // FP8 block structure
}

// parseGroups reads config_groups in group-name order with every target's group (a later group
// naming the same target replaces the earlier one, as target_scheme_map does).
func parseGroups(qc map[string]any) (targets []string, byTarget map[string]*scheme) {
	groups, _ := qc["config_groups"].(map[string]any)
	top, _ := qc["format"].(string)
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	byTarget = map[string]*scheme{}
	for _, g := range names {
		gm, _ := groups[g].(map[string]any)
		w, _ := gm["weights"].(map[string]any)
		s := &scheme{group: g, format: top, top: top}
		if f, ok := gm["format"].(string); ok && f != "" {
			s.format = f
		}
		in, _ := gm["input_activations"].(map[string]any)
		s.kind = formatOf(w, in)
		s.actorder, _ = w["actorder"].(string)
		s.symmetric, _ = w["symmetric"].(bool)
		s.strategy, _ = w["strategy"].(string)
		if gs, ok := rules.IntOf(w["group_size"]); ok {
			s.groupSize = int(gs)
		} else {
			s.groupSize = -1
		}
		if bs, ok := w["block_structure"].([]any); ok && len(bs) == 2 {
			for _, v := range bs {
				n, _ := rules.IntOf(v)
				s.block = append(s.block, int(n))
			}
		}
		ts, _ := gm["targets"].([]any)
		for _, t := range ts {
			if str, ok := t.(string); ok {
				if _, dup := byTarget[str]; !dup {
					targets = append(targets, str)
				}
				byTarget[str] = s
			}
		}
	}
	return targets, byTarget
}

func stringList(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	if a, ok := v.([]string); ok {
		out = append(out, a...)
	}
	return out
}

func ctSource(e Engine) (utils, cfg Source) {
	if e == VLLM {
		return srcVLLMUtils, srcVLLMCT
	}
	return srcSGLUtils, srcSGLCT
}

// checkCompressed checks a compressed-tensors (decode) checkpoint.
func (c *checker) checkCompressed(qc map[string]any, mods []Module) {
	utils, cfgSrc := ctSource(c.e)
	if f, _ := qc["format"].(string); c.e == SGLang && f == "mixed-precision" {
		c.problem("", "format", cfgSrc, "SGLang does not load the compressed-tensors format %q (INT4 experts beside FP8 dense layers, --decode-dense fp8); convert with --decode-dense bf16 for SGLang", f)
	}
	ignore := stringList(qc["ignore"])
	targets, byTarget := parseGroups(qc)
	for _, m := range mods {
		fused := PackedMapping(c.e, c.fam, m.Draft)
		switch m.Kind {
		case KindUnquantized:
			c.checkUnquantized(m)
			continue
		case KindEmbedding:
			for _, p := range m.Parts {
				if ok, why := c.plain(p); !ok {
					c.problem(m.Name, "embedding", cfgSrc, "%s %s; compressed-tensors never quantizes embeddings and heads", p, why)
				}
			}
			continue
		}
		ign, err := ShouldIgnore(m.Name, ignore, fused)
		if err != nil {
			c.problem(m.Name, "fused-ignore", utils, "the ignore list matches some of %v but not all: the engine raises ValueError (one scheme per fused module)", m.Parts)
			continue
		}
		if ign {
			for _, p := range m.Parts {
				if ok, why := c.plain(p); !ok {
					c.problem(m.Name, "ignored-not-plain", utils, "matched by the ignore list, so built unquantized, but %s %s", p, why)
				}
			}
			continue
		}
		if m.Kind == KindMoE {
			c.checkMoE(m, targets, byTarget)
			continue
		}
		t, ok := FindTarget(m.Name, "Linear", targets, fused)
		if !ok {
			c.problem(m.Name, "no-target", utils, "matched by no ignore entry and no config-group target: the engine raises \"Unable to find matching target\"")
			continue
		}
		s := byTarget[t]
		for _, p := range m.Parts {
			c.checkSchemeTensors(m.Name, p, s, t, cfgSrc)
		}
		if r := rulesOf(s.kind); r != nil && r.linear != nil {
			r.linear(c, m, s)
		}
	}
}

// checkSchemeTensors checks that checkpoint module p holds the tensors scheme s reads.
func (c *checker) checkSchemeTensors(module, p string, s *scheme, target string, src Source) {
	if r := rulesOf(s.kind); r != nil {
		r.tensors(c, module, p, s, target, src)
		return
	}
	switch s.kind {
	case FormatFP8Block:
		w, ok1 := c.byName[p+".weight"]
		sc, ok2 := c.byName[p+".weight_scale"]
		if !ok1 || !ok2 || w.DType != safetensors.F8E4M3 || len(w.Shape) != 2 {
			_, why := c.plain(p)
			if ok, _ := c.plain(p); ok {
				why = "holds a plain weight"
			}
			c.problem(module, "scheme-tensors", src, "gets the FP8 block scheme of %s (target %q), but %s %s", s.group, target, p, why)
			return
		}
		want := []int64{ceilDiv(w.Shape[0], int64(s.block[0])), ceilDiv(w.Shape[1], int64(s.block[1]))}
		if len(sc.Shape) != 2 || sc.Shape[0] != want[0] || sc.Shape[1] != want[1] {
			c.problem(module, "scheme-tensors", src, "%s: FP8 weight_scale %v, want %v for %v blocks", p, sc.Shape, want, s.block)
		}
	default:
		c.problem(module, "scheme", src, "gets config group %s (target %q), a scheme pdq does not check", s.group, target)
	}
}

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
