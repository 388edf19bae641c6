package compare

import (
	"fmt"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/safetensors"
	"pdq/serving"
)

// Tensors returns the tensors the decode checkpoint holds for a rows×cols module in format f,
// with their sizes, in the layouts of docs/FORMATS.md and docs/FP4.md.
func (f Format) Tensors(module string, rows, cols int64) []serving.Tensor {
	g := int64(f.width(int(cols)))
	t := func(suffix string, dt safetensors.DType, shape ...int64) serving.Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		b, _ := dt.ByteSize(uint64(n))
		return serving.Tensor{Name: module + suffix, Shape: shape, Bytes: int64(b)}
	}
	switch f.Kind {
	case KindNVFP4:
		return []serving.Tensor{
			t(".weight_packed", safetensors.U8, rows, cols/2),
			t(".weight_scale", safetensors.F8E4M3, rows, cols/g),
			t(".weight_global_scale", safetensors.F32, 1),
		}
	case KindMXFP4:
		return []serving.Tensor{
			t(".weight_packed", safetensors.U8, rows, cols/2),
			t(".weight_scale", safetensors.U8, rows, cols/g),
		}
	}
	return []serving.Tensor{
		t(".weight_packed", safetensors.I32, rows, cols/8),
		t(".weight_scale", safetensors.BF16, rows, cols/g),
		t(".weight_shape", safetensors.I64, 2),
	}
}

// DecodeTensors lists the tensors of the decode checkpoint of plan p with its targets in
// format f, the other modules as the plan writes them. For the formats the plan itself can
// write (INT4 of the plan's group size) it is the plan's own list (serving.Tensors); the test
// checks that.
func DecodeTensors(p *convert.Plan, f Format) []serving.Tensor {
	target := p.TargetScheme()
	var out []serving.Tensor
	for _, m := range p.Modules {
		if m.Linear && m.Scheme(convert.KindDecode) == target {
			out = append(out, f.Tensors(m.Name, int64(m.Rows), int64(m.Cols))...)
			continue
		}
		for _, s := range p.OutputSpecs(m, convert.KindDecode) {
			n := uint64(1)
			for _, d := range s.Shape {
				n *= uint64(d)
			}
			b, _ := s.DType.ByteSize(n)
			out = append(out, serving.Tensor{Name: s.Name, Shape: s.Shape, Bytes: int64(b)})
		}
	}
	return out
}

// Setup is the decode server a comparison sizes: the model, its parallel layout, one GPU's
// memory budget and a token's KV-cache cost, as pdq plan computes them.
type Setup struct {
	Model    serving.Model
	Parallel serving.Parallel
	Budget   serving.Budget
	KV       serving.KVCost
	SeqLen   int
}

// Sizes fills in each summary's bytes (of the target modules and of the whole decode
// checkpoint) and, with a setup, the decode server's capacity with that format and the expert
// widths the engines' INT4 MoE kernels reject.
func Sizes(p *convert.Plan, sums []Summary, formats []Format, setup *Setup) error {
	targets := Targets(p)
	for i, f := range formats {
		s := &sums[i]
		s.TargetBytes = 0
		for _, m := range targets {
			s.TargetBytes += f.StoredBytes(int64(m.Rows), int64(m.Cols))
		}
		ts := DecodeTensors(p, f)
		s.DecodeBytes = 0
		for _, t := range ts {
			s.DecodeBytes += t.Bytes
		}
		if setup == nil {
			continue
		}
		w, err := setup.Model.PerGPUWeights(ts, setup.Parallel)
		if err != nil {
			return fmt.Errorf("compare: %s: %w", f.Name, err)
		}
		c := serving.Plan(serving.RoleDecode, setup.Budget, w, setup.KV, setup.SeqLen)
		s.Serving = &c
		s.Warnings = append(s.Warnings, c.Problems...)
		if f.Kind == KindInt4 {
			g := f.Group
			if g == quantize.PerChannel {
				g = 0
			}
			s.Warnings = append(s.Warnings, setup.Model.ExpertWidthProblems(setup.Parallel, false, g)...)
		}
	}
	return nil
}
