package serving

import (
	"fmt"
	"strconv"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/safetensors"
)

// The fixed group sizes of the decode formats other than INT4 (docs/FP4.md): NVFP4 one e4m3
// scale per 16 weights, MXFP4 one E8M0 exponent per 32, W4AFP8 INT4 groups of 128 (the only
// size vLLM's W4A8 kernels take).
const (
	NVFP4Group  = 16
	MXFP4Group  = 32
	W4AFP8Group = 128
)

// FormatGroup is the group size of decode format f: int4Group for INT4 (convert.Options.GroupSize;
// 0 or convert.PerChannel for one group per row), the format's own for the others.
func FormatGroup(f convert.DecodeFormat, int4Group int) int {
	switch f {
	case convert.DecodeNVFP4:
		return NVFP4Group
	case convert.DecodeMXFP4:
		return MXFP4Group
	case convert.DecodeW4AFP8:
		return W4AFP8Group
	}
	if int4Group == 0 {
		return convert.PerChannel
	}
	return int4Group
}

// FormatTensors lists the tensors one Linear weight of rows (out) × cols (in) features is stored
// as in decode format f, in compressed-tensors' layouts (docs/FP4.md, FORMATS.md §4), named
// module + "." + suffix, with their byte sizes:
//
//   - int4, w4afp8 (pack-quantized): weight_packed I32 [rows, cols/8], weight_scale BF16
//     [rows, cols/g] (g = int4Group for INT4, 128 for W4AFP8; one column per channel), weight_shape
//     I64 [2]: 4 + 16/g bits per weight;
//   - nvfp4 (nvfp4-pack-quantized): weight_packed U8 [rows, cols/2], weight_scale F8_E4M3
//     [rows, cols/16], weight_global_scale F32 [1]: 4.5 bits per weight and 4 bytes;
//   - mxfp4 (mxfp4-pack-quantized): weight_packed U8 [rows, cols/2], weight_scale U8 (E8M0)
//     [rows, cols/32]: 4.25 bits per weight.
//
// int4Group is convert.Options.GroupSize (0 or convert.PerChannel: one scale per row) and is
// ignored by the other formats. The error wraps ErrOptions for an unknown format or a cols the
// format's groups do not divide.
func FormatTensors(module string, f convert.DecodeFormat, int4Group int, rows, cols int64) ([]Tensor, error) {
	if f == "" {
		f = convert.DecodeInt4
	}
	g := int64(FormatGroup(f, int4Group))
	if g == convert.PerChannel {
		g = cols
	}
	if rows <= 0 || cols <= 0 || g <= 0 || cols%g != 0 || cols%8 != 0 {
		return nil, fmt.Errorf("%w: %s: %d×%d weight in %s: %d input features are not a multiple of the group %d and of 8",
			ErrOptions, module, rows, cols, f, cols, g)
	}
	t := func(suffix string, dt safetensors.DType, shape ...int64) Tensor {
		n := int64(dt.Bits() / 8)
		for _, d := range shape {
			n *= d
		}
		return Tensor{Name: module + "." + suffix, Shape: shape, Bytes: n}
	}
	switch f {
	case convert.DecodeInt4, convert.DecodeW4AFP8:
		return []Tensor{
			t("weight_packed", safetensors.I32, rows, cols/8),
			t("weight_scale", safetensors.BF16, rows, cols/g),
			t("weight_shape", safetensors.I64, 2),
		}, nil
	case convert.DecodeNVFP4:
		return []Tensor{
			t("weight_packed", safetensors.U8, rows, cols/2),
			t("weight_scale", safetensors.F8E4M3, rows, cols/g),
			t("weight_global_scale", safetensors.F32, 1),
		}, nil
	case convert.DecodeMXFP4:
		return []Tensor{
			t("weight_packed", safetensors.U8, rows, cols/2),
			t("weight_scale", safetensors.U8, rows, cols/g),
		}, nil
	}
	return nil, fmt.Errorf("%w: decode format %q (want int4, nvfp4, mxfp4 or w4afp8)", ErrOptions, f)
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

// isDecodeTarget reports the schemes of the decode checkpoint's quantized targets (an
// already-quantized source's targets passed through in its own format are targets too).
func isDecodeTarget(s convert.Scheme) bool {
	switch s {
	case convert.SchemeInt4, convert.SchemeNVFP4, convert.SchemeMXFP4, convert.SchemeW4AFP8, convert.SchemePassed:
		return true
	}
	return false
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
		if isDecodeTarget(m.Scheme(convert.KindDecode)) {
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

// EngineFormat is decode format f as the engines' rules name the routed experts' format.
func EngineFormat(f convert.DecodeFormat) engines.Format {
	switch f {
	case convert.DecodeNVFP4:
		return engines.FormatNVFP4
	case convert.DecodeMXFP4:
		return engines.FormatMXFP4
	case convert.DecodeW4AFP8:
		return engines.FormatW4AFP8
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
// routed experts in decode format f, beyond INT4's (ExpertWidthProblems): the FP4 Marlin MoE
// kernel of the NVFP4 and MXFP4 weight-only paths needs moe_intermediate_size / (TP/EP) to be a
// multiple of 64, vLLM's CUTLASS W4A8 MoE (W4AFP8) a multiple of 256 (docs/SERVING.md).
func (m Model) FormatWidthProblems(p Parallel, f convert.DecodeFormat, e Engine) []string {
	moeTP := p.TP / p.EP
	if m.MoEInter <= 0 || moeTP <= 0 {
		return nil
	}
	var mult int
	var what string
	switch {
	case f == convert.DecodeNVFP4 || f == convert.DecodeMXFP4:
		mult, what = 64, fmt.Sprintf("%s experts (FP4 Marlin MoE)", f)
	case f == convert.DecodeW4AFP8 && e == VLLM:
		mult, what = 256, "W4AFP8 experts (vLLM's CUTLASS W4A8 MoE)"
	case f == convert.DecodeW4AFP8:
		mult, what = W4AFP8Group, "W4AFP8 experts (groups of 128)"
	default:
		return nil
	}
	if m.MoEInter%moeTP != 0 || (m.MoEInter/moeTP)%mult != 0 {
		return []string{fmt.Sprintf("%s: moe_intermediate_size %d / %d expert-TP ranks = %s per rank, not a multiple of %d; raise EP",
			what, m.MoEInter, moeTP, strconv.FormatFloat(float64(m.MoEInter)/float64(moeTP), 'g', -1, 64), mult)}
	}
	return nil
}
