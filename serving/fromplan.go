package serving

import (
	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// Checkpoint names the three checkpoints a plan serves: the source, and convert's two outputs.
type Checkpoint string

// The checkpoints.
const (
	Source  Checkpoint = "source"
	Prefill Checkpoint = "prefill"
	Decode  Checkpoint = "decode"
)

// Tensors lists the tensors of one checkpoint of a conversion plan: the source's from its headers,
// an output's from the plan's tensor specs (nil when the plan does not write that output).
func Tensors(p *convert.Plan, which Checkpoint) []Tensor {
	fromSource := func() []Tensor {
		ts := p.Source.Tensors()
		out := make([]Tensor, len(ts))
		for i, t := range ts {
			out[i] = Tensor{Name: t.Name, Shape: t.Shape, Bytes: t.ByteSize()}
		}
		return out
	}
	switch which {
	case Source:
		return fromSource()
	case Prefill:
		pre := p.Output(convert.KindPrefill)
		if pre == nil {
			return nil
		}
		if pre.CopySource {
			return fromSource()
		}
	case Decode:
		if p.Output(convert.KindDecode) == nil {
			return nil
		}
	}
	var out []Tensor
	for _, m := range p.Modules {
		for _, s := range p.OutputSpecs(m, convert.OutputKind(which)) {
			out = append(out, Tensor{Name: s.Name, Shape: s.Shape, Bytes: specBytes(s)})
		}
	}
	return out
}

func specBytes(s safetensors.TensorSpec) int64 {
	n := uint64(1)
	for _, d := range s.Shape {
		n *= uint64(d)
	}
	b, _ := s.DType.ByteSize(n)
	return int64(b)
}

// ExpertFormats says what a checkpoint of the plan holds in its routed experts: FP8 blocks, or
// INT4 with a group size (0: none, per channel, which the width rule does not constrain, or a
// decode format other than INT4, whose rules FormatWidthProblems has).
func ExpertFormats(p *convert.Plan, which Checkpoint) (fp8 bool, int4Group int) {
	fp8Source := p.Layout.FP8()
	switch which {
	case Source:
		for _, m := range p.Modules { // an INT4 source (Kimi K2.6) serves its experts as they are
			if g := m.SourceInt4Group(); g > 0 && m.Role == rules.RoleRoutedExpert {
				return false, g
			}
		}
		return fp8Source, 0
	case Prefill:
		return true, 0
	}
	if p.Options.GroupSize > 0 && EngineFormat(p.Options.DecodeFormat) == engines.FormatInt4 {
		return false, p.Options.GroupSize
	}
	return false, 0 // per channel, or another decode format (FormatWidthProblems)
}
