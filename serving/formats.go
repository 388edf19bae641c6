package serving

import (
	"fmt"
	"strconv"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
)

// FormatGroup is the group size of decode format f: int4Group for INT4 (convert.Options.GroupSize;
// 0 or convert.PerChannel for one group per row), the format's own for the formats that fix
// theirs (convert.FormatInfo.FixedGroup).
func FormatGroup(f convert.DecodeFormat, int4Group int) int {
	if g := f.FixedGroup(); g > 0 {
		return g
	}
	if int4Group == 0 {
		return convert.PerChannel
	}
	return int4Group
}

// FormatTensors lists the tensors one Linear weight of rows (out) × cols (in) features is stored
// as in decode format f, in its compressed-tensors layout (convert.FormatInfo.Tensors;
// docs/FP4.md, FORMATS.md §4), named module + "." + suffix, with their byte sizes. int4Group is
// convert.Options.GroupSize (0 or convert.PerChannel: one scale per row) and is ignored by the
// formats with fixed groups. The error wraps ErrOptions for an unknown format or a cols the
// format's groups do not divide.
func FormatTensors(module string, f convert.DecodeFormat, int4Group int, rows, cols int64) ([]Tensor, error) {
	info, ok := convert.FormatOf(f)
	if !ok {
		return nil, fmt.Errorf("%w: decode format %q (want %s)", ErrOptions, f, convert.FormatList(false, "or"))
	}
	g := int64(FormatGroup(info.Format, int4Group))
	if g == convert.PerChannel {
		g = cols
	}
	if rows <= 0 || cols <= 0 || g <= 0 || cols%g != 0 || cols%8 != 0 {
		return nil, fmt.Errorf("%w: %s: %d×%d weight in %s: %d input features are not a multiple of the group %d and of 8",
			ErrOptions, module, rows, cols, info.Format, cols, g)
	}
	var out []Tensor
	for _, t := range info.Tensors(rows, cols, g) {
		out = append(out, Tensor{Name: module + "." + t.Suffix, Shape: t.Shape, Bytes: t.Bytes()})
	}
	return out, nil
}

// StoredBytes is the bytes one Linear weight of rows × cols features takes in decode format f,
// every companion tensor included (the sum of FormatTensors): what a format costs on disk and,
// split with its weight, on the GPUs.
func StoredBytes(f convert.DecodeFormat, int4Group int, rows, cols int64) (int64, error) {
	ts, err := FormatTensors("m", f, int4Group, rows, cols)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, t := range ts {
		n += t.Bytes
	}
	return n, nil
}

// DecodeTensorsAs lists the tensors of plan p's decode checkpoint with its quantized targets (the
// routed experts, or what --targets chose) stored in decode format f instead of the plan's own,
// every other tensor as planned. With f the plan's own format it equals Tensors(p, Decode); with
// another it answers "what would this checkpoint cost per GPU in f" from one plan, without
// planning again (int4Group as in FormatTensors). nil when p writes no decode checkpoint.
func DecodeTensorsAs(p *convert.Plan, f convert.DecodeFormat, int4Group int) ([]Tensor, error) {
	if p.Output(convert.KindDecode) == nil {
		return nil, nil
	}
	var out []Tensor
	for _, m := range p.Modules {
		if convert.IsTargetScheme(m.Scheme(convert.KindDecode)) {
			ts, err := FormatTensors(m.Name, f, int4Group, int64(m.Rows), int64(m.Cols))
			if err != nil {
				return nil, err
			}
			out = append(out, ts...)
			continue
		}
		for _, s := range p.OutputSpecs(m, convert.KindDecode) {
			out = append(out, Tensor{Name: s.Name, Shape: s.Shape, Bytes: specBytes(s)})
		}
	}
	return out, nil
}

// EngineFormat is decode format f as the engines' rules name the routed experts' format
// (convert.FormatInfo.Engine; INT4's for a format not registered).
func EngineFormat(f convert.DecodeFormat) engines.Format {
	if info, ok := convert.FormatOf(f); ok {
		return info.Engine
	}
	return engines.FormatInt4
}

// FormatGPUs is the format × engine × GPU table's row for routed experts in decode format f: per
// engine and GPU generation, whether it loads them and through which kernel (docs/SERVING.md,
// "Decode formats and GPUs").
func FormatGPUs(f convert.DecodeFormat) []engines.Support {
	return engines.SupportTable(EngineFormat(f))
}

// FormatWidthProblems names the expert widths per rank that engine e's MoE kernels reject for
// routed experts in decode format f, beyond INT4's (ExpertWidthProblems): the multiple of
// moe_intermediate_size / (TP/EP) the format's MoE kernel needs (engines.ExpertWidthRule;
// docs/SERVING.md).
func (m Model) FormatWidthProblems(p Parallel, f convert.DecodeFormat, e Engine) []string {
	moeTP := p.TP / p.EP
	if m.MoEInter <= 0 || moeTP <= 0 {
		return nil
	}
	mult, what := engines.ExpertWidthRule(EngineFormat(f), engines.Engine(e))
	if mult == 0 {
		return nil
	}
	if m.MoEInter%moeTP != 0 || (m.MoEInter/moeTP)%mult != 0 {
		return []string{fmt.Sprintf("%s: moe_intermediate_size %d / %d expert-TP ranks = %s per rank, not a multiple of %d; raise EP",
			what, m.MoEInter, moeTP, strconv.FormatFloat(float64(m.MoEInter)/float64(moeTP), 'g', -1, 64), mult)}
	}
	return nil
}
