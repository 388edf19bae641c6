package engines

import (
	"regexp"
	"sort"
	"strings"
)

// Patterns returns compressed-tensors "ignore" or "targets" entries that reach every module of
// names as both engines build it, and none of others (nor the FusedMoE layers over them).
//
// The convention, chosen because the engines match these entries against their own module names
// and not the checkpoint's:
//
//   - Fused names: where all parts of a fused module are in names (gate_proj and up_proj;
//     q_a_proj and kv_a_proj_with_mqa; q_proj, k_proj and v_proj), the entry also matches the
//     fused names the engines build (gate_up_proj; fused_qkv_a_proj_with_mqa in SGLang,
//     fused_qkv_a_proj in vLLM; qkv_proj), so it holds whether or not the model registers the
//     fused name in packed_modules_mapping (SGLang's DeepSeek-V2 family registers only the
//     attention one).
//   - Any prefix: a module of a numbered layer becomes "re:.*\.TAIL$" over its name after the
//     layer index, so one entry also reaches the MTP layer as the draft models name it (SGLang
//     "model.decoder.TAIL", vLLM "model.layers.N.mtp_block.TAIL"); entries end with "$", so a
//     dense MLP's pattern never reaches a routed expert's projection.
//   - An entry that would reach one of others falls back to the module's full name (with its
//     fused alternatives), and a plain name that is a substring of another module's name (the
//     engines match plain entries as substrings) is written as an anchored "re:" entry.
//
// The result is sorted and deterministic.
func Patterns(names, others []string) []string {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	avoid := map[string]bool{}
	for _, o := range others {
		avoid[o] = true
		if sm := reExpert.FindStringSubmatch(o); sm != nil {
			avoid[sm[1]] = true // the FusedMoE layer the engines build over the expert
		}
	}
	// clashes reports whether entry reaches a name of avoid; an entry "re:.*\.S$" (suffixes
	// given) reaches exactly the names ending in one of its literal suffixes.
	memo := map[string]bool{}
	clashes := func(entry string, suffixes []string) bool {
		if v, ok := memo[entry]; ok {
			return v
		}
		hit := false
		for o := range avoid {
			if suffixes != nil {
				for _, sfx := range suffixes {
					hit = hit || strings.HasSuffix(o, sfx)
				}
			} else {
				hit = equalOrRegexMatch(o, entry, true)
			}
			if hit {
				break
			}
		}
		memo[entry] = hit
		return hit
	}
	seen := map[string]bool{}
	var out []string
	emit := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, n := range names {
		parent, leaf := splitLast(n)
		alts := fusedAlternatives(parent, leaf, set)
		quoted := make([]string, len(alts))
		for i, a := range alts {
			quoted[i] = regexp.QuoteMeta(a)
		}
		alt := quoted[0]
		if len(alts) > 1 {
			alt = "(" + strings.Join(quoted, "|") + ")"
		}
		if sm := reLayer.FindStringSubmatch(n); sm != nil {
			tailParent, _ := splitLast(sm[2])
			p, lit := `re:.*\.`, "."
			if tailParent != "" {
				p += regexp.QuoteMeta(tailParent) + `\.`
				lit += tailParent + "."
			}
			p += alt + "$"
			suffixes := make([]string, len(alts))
			for i, a := range alts {
				suffixes[i] = lit + a
			}
			if !clashes(p, suffixes) {
				emit(p)
				continue
			}
		}
		if len(alts) == 1 && !clashes(n, nil) {
			emit(n)
			continue
		}
		full := "re:"
		if parent != "" {
			full += regexp.QuoteMeta(parent) + `\.`
		}
		emit(full + alt + "$")
	}
	sort.Strings(out)
	return out
}

// fusedAlternatives lists leaf, its fused siblings and the fused names the engines build from
// them, when every sibling under parent is in set; else just leaf.
func fusedAlternatives(parent, leaf string, set map[string]bool) []string {
	for _, specs := range [][]fusedSpec{fusedByFamily[FamilyDeepSeek], fusedByFamily[FamilyGLM4]} {
		for _, s := range specs {
			if !contains(s.parts, leaf) {
				continue
			}
			all := true
			for _, p := range s.parts {
				all = all && set[join(parent, p)]
			}
			if !all {
				continue
			}
			alts := append([]string(nil), s.parts...)
			for _, f := range []string{s.sglang, s.vllm} {
				if !contains(alts, f) {
					alts = append(alts, f)
				}
			}
			return alts
		}
	}
	return []string{leaf}
}

func join(parent, leaf string) string {
	if parent == "" {
		return leaf
	}
	return parent + "." + leaf
}
