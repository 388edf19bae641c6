package engines

import "fmt"

// expertRules is what the engines' rules know of one routed-expert format, in one place: how a
// config group is told to be of it, the tensors its scheme reads, the checks of the MoE method
// the engines pick for it, on which GPUs each engine loads it and the engine files all of it was
// read in. Each format's file registers its rules (int4.go is INT4's); the checker, the
// support table and the messages ask the table, never the format's name.
type expertRules struct {
	format Format
	// describe names the format in messages ("INT4 weight-only (pack-quantized)").
	describe string
	// classify reports whether a config group's weights and input_activations (nil for none)
	// are of the format.
	classify func(w, in map[string]any) bool
	// tensors checks that checkpoint module p holds the tensors scheme s of the format reads.
	tensors func(c *checker, module, p string, s *scheme, target string, src Source)
	// moe checks a FusedMoE layer's experts against the MoE method the engine picks for the
	// format and returns the engine file of that method.
	moe func(c *checker, m Module, s *scheme) Source
	// linear, when set, checks a fused Linear (not a MoE layer) of the format.
	linear func(c *checker, m Module, s *scheme)
	// width, when set, is the multiple the engine's MoE kernel needs of the expert
	// intermediate size per rank for the format, and what to call the experts in a message.
	width func(e Engine) (mult int, what string)
	// support are the format's rows of the format × engine × GPU table.
	support []Support
	// sources are the engine files its rules cite beyond the common ones (Sources).
	sources []Source
}

// expertFormats is the table of routed-expert formats, in registration order.
var expertFormats []*expertRules

// registerExpertFormat adds a format's rules to the table, its rows to the support table and
// its name to SupportedFormats; a format registered twice is a programming error.
func registerExpertFormat(r expertRules) {
	if rulesOf(r.format) != nil {
		panic(fmt.Sprintf("engines: format %s registered twice", r.format))
	}
	expertFormats = append(expertFormats, &r)
	supportTable = append(supportTable, r.support...)
	SupportedFormats = append(SupportedFormats, r.format)
}

// rulesOf returns format f's rules, nil for a format without any (FP8 blocks, other schemes).
func rulesOf(f Format) *expertRules {
	for _, r := range expertFormats {
		if r.format == f {
			return r
		}
	}
	return nil
}

// describe is format f for messages.
func describe(f Format) string {
	if r := rulesOf(f); r != nil {
		return r.describe
	}
	return fmt.Sprint(f)
}

// ExpertWidthRule is the multiple that engine e's MoE kernel needs of moe_intermediate_size per
// expert-TP rank for routed experts of format f, and what to call them in a message; mult is 0
// when the format has no rule beyond INT4's Marlin rule (or no rules at all).
func ExpertWidthRule(f Format, e Engine) (mult int, what string) {
	if r := rulesOf(f); r != nil && r.width != nil {
		return r.width(e)
	}
	return 0, ""
}
