package serving

import (
	"fmt"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/quantize/rules"
)

// EngineInput is a planned output as the engines' rules read it: its config.json and tensors.
// ok is false when the plan has no such output or no config.json.
func EngineInput(p *convert.Plan, which Checkpoint) (in engines.Input, ok bool) {
	var out *convert.Output
	switch which {
	case Prefill:
		out = p.Output(convert.KindPrefill)
	case Decode:
		out = p.Output(convert.KindDecode)
	}
	if out == nil || out.Config == nil {
		return in, false
	}
	in.Config = rules.CloneConfig(out.Config) // as written to disk: JSON numbers and lists
	if out.CopySource {
		for _, t := range p.Source.Tensors() {
			in.Tensors = append(in.Tensors, engines.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
		}
		return in, true
	}
	for _, s := range out.Shards {
		for _, t := range s.Specs {
			in.Tensors = append(in.Tensors, engines.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
		}
	}
	return in, true
}

// EngineFlags applies engine e's loading rules to the planned prefill and decode outputs: the
// launch flags each server needs, and what the engine would refuse, one line per finding
// prefixed with the output ("decode: ..."). The kernels' expert-width rules are left to
// Model.ExpertWidthProblems (tp 0 here).
func EngineFlags(p *convert.Plan, e Engine) (prefill, decode, problems []string) {
	return EngineFlagsOn(p, e, 0)
}

// EngineFlagsOn is EngineFlags for servers whose GPUs have compute capability sm (engines.ParseGPU;
// 0: not known): the routed experts' format must also load on that GPU.
func EngineFlagsOn(p *convert.Plan, e Engine, sm int) (prefill, decode, problems []string) {
	for _, c := range []struct {
		which Checkpoint
		flags *[]string
	}{{Prefill, &prefill}, {Decode, &decode}} {
		in, ok := EngineInput(p, c.which)
		if !ok {
			continue
		}
		r := engines.Check(engines.Engine(e), in, engines.Options{SM: sm})
		*c.flags = r.RequiredFlags()
		r = engines.Check(engines.Engine(e), in, engines.Options{SM: sm, Flags: *c.flags})
		for _, f := range r.Problems {
			problems = append(problems, fmt.Sprintf("%s: %s", c.which, f))
		}
	}
	return prefill, decode, problems
}
