package compare

import (
	"fmt"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/serving"
)

// decodeFormat is the conversion's name of the format and its INT4 group size (0 for the
// formats with fixed groups), as the serving package sizes formats.
func (f Format) decodeFormat() (convert.DecodeFormat, int) {
	if f.Kind == KindDecode {
		return f.Decode, 0
	}
	return convert.DecodeInt4, f.Group
}

// DecodeTensors lists the tensors of the decode checkpoint of plan p with its targets in
// format f, the other modules as the plan writes them (serving.DecodeTensorsAs).
func DecodeTensors(p *convert.Plan, f Format) ([]serving.Tensor, error) {
	df, g := f.decodeFormat()
	ts, err := serving.DecodeTensorsAs(p, df, g)
	if err != nil {
		return nil, fmt.Errorf("compare: %s: %w", f.Name, err)
	}
	return ts, nil
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
		df, g := f.decodeFormat()
		s.TargetBytes = 0
		for _, m := range targets {
			n, err := serving.StoredBytes(df, g, int64(m.Rows), int64(m.Cols))
			if err != nil {
				return fmt.Errorf("compare: %s: %w", f.Name, err)
			}
			s.TargetBytes += n
		}
		ts, err := DecodeTensors(p, f)
		if err != nil {
			return err
		}
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
