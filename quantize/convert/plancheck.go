package convert

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

// checkTargets refuses a decode output with no module in its decode format (ErrNoTargets) unless the options
// accept one, saying what the checkpoint holds: a dense model or a mistyped pattern otherwise
// yields a "pack-quantized" checkpoint whose ignore list covers every Linear.
func (p *Plan) checkTargets(targets, ignore *regexp.Regexp) error {
	if p.Options.Only == KindPrefill || p.Options.NoInt4OK || p.Options.TargetSet != nil || len(p.Skipped) > 0 {
		return nil // with skipped targets, --on-unsupported skip asked for them dense
	}
	var linears, matched, experts int
	example := ""
	for _, m := range p.Modules {
		if s := m.Scheme(KindDecode); s == p.Options.targetScheme() || s == SchemePassed {
			return nil
		}
		if !m.Linear || neverQuantized[m.Role] {
			continue
		}
		linears++
		if example == "" || m.Role == rules.RoleRoutedExpert && !strings.Contains(example, "expert") {
			example = m.Name
		}
		if m.Role == rules.RoleRoutedExpert {
			experts++
		}
		if targets.MatchString(m.Name) {
			matched++
		}
	}
	why := fmt.Sprintf("no module matches the targets %q", p.Options.Targets)
	switch {
	case matched > 0:
		why = fmt.Sprintf("the ignore pattern %q removes all %d modules the targets %q match", p.Options.Ignore, matched, p.Options.Targets)
	}
	held := fmt.Sprintf("this checkpoint has %d Linear modules", linears)
	if experts == 0 {
		held = "this checkpoint has no routed experts: " + strconv.Itoa(linears) + " Linear modules"
	}
	if example != "" {
		held += ", e.g. " + example
	}
	return fmt.Errorf("convert: %s: %w (%s): %s; %s", p.Source.Dir, ErrNoTargets, p.Options.decodeFormat(), why, held)
}

// configWarnings names config.json values that contradict the tensors: engines size their
// buffers from config.json, so a mismatch fails or misbehaves at load time.
func (p *Plan) configWarnings() []string {
	if p.Config == nil {
		return nil
	}
	var ws []string
	warn := func(key string, have int64, what string) {
		if v, ok := rules.ConfigInt(p.Config, key); ok && v != have {
			ws = append(ws, fmt.Sprintf("config.json says %s %d but %s %d", key, v, what, have))
		}
	}
	expertRows, maxExpert := int64(-1), int64(-1)
	for _, m := range p.Modules {
		switch {
		case m.Role == rules.RoleEmbedding && strings.Contains(m.Weight.Name, "embed_tokens") && len(m.Weight.Shape) == 2:
			warn("hidden_size", m.Weight.Shape[1], "the embedding has width")
			warn("vocab_size", m.Weight.Shape[0], "the embedding has rows")
		case m.Role == rules.RoleRoutedExpert && m.Linear:
			if expertRows < 0 && strings.HasSuffix(m.Name, "gate_proj") {
				expertRows = int64(m.Rows)
			}
			if sm := reExpert.FindStringSubmatch(m.Name); sm != nil {
				e, _ := strconv.ParseInt(sm[1], 10, 64)
				maxExpert = max(maxExpert, e)
			}
		}
	}
	if expertRows > 0 {
		warn("moe_intermediate_size", expertRows, "the routed experts' gate_proj has rows")
	}
	if maxExpert >= 0 {
		key := "n_routed_experts"
		if rules.ConfigValue(p.Config, key) == nil {
			key = "num_experts"
		}
		if v, ok := rules.ConfigInt(p.Config, key); ok && v < maxExpert+1 {
			ws = append(ws, fmt.Sprintf("config.json says %s %d but the checkpoint holds expert %d", key, v, maxExpert))
		}
	}
	return ws
}

// engineWarnings checks the expert width against what vLLM and SGLang need per tensor-parallel
// rank (FORMATS.md §4, §5): FP8 blocks need the intermediate size per rank to be a multiple of
// 128, and each decode format its own multiple (INT4 groups max(64, group size)). GLM-4.5's 1536
// at TP8 gives 192: fine for INT4, not for FP8 blocks.
func (p *Plan) engineWarnings() []string {
	n, _ := rules.ConfigInt(p.Config, "moe_intermediate_size")
	inter := int(n)
	if inter <= 0 {
		return nil
	}
	check := func(what string, mult int) string {
		var bad []string
		for _, tp := range []int{2, 4, 8} {
			if inter%tp != 0 || (inter/tp)%mult != 0 {
				bad = append(bad, fmt.Sprintf("TP%d (%s)", tp, strconv.FormatFloat(float64(inter)/float64(tp), 'g', -1, 64)))
			}
		}
		if bad == nil {
			return ""
		}
		return fmt.Sprintf("%s: the engines need moe_intermediate_size / TP to be a multiple of %d; %d fails at %s: use expert parallelism or a smaller TP there",
			what, mult, inter, strings.Join(bad, ", "))
	}
	var ws []string
	if p.Output(KindPrefill) != nil {
		if w := check("prefill FP8 blocks", FP8BlockSize); w != "" {
			ws = append(ws, w)
		}
	}
	if p.Output(KindDecode) == nil {
		return ws
	}
	// Only the formats with a width rule are checked here (FormatInfo.widthRule; docs/FP4.md).
	if f, ok := FormatOf(p.Options.decodeFormat()); ok && f.widthRule != nil {
		if what, mult := f.widthRule(&p.Options); mult > 0 {
			if w := check(what, mult); w != "" {
				ws = append(ws, w)
			}
		}
	}
	return ws
}
