package synth

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"

	"pdq/internal/floatcodec"
	"pdq/safetensors"
)

// Routed experts that arrive already quantized, as published checkpoints ship them: Kimi
// K2-Thinking and K2.6 hold their routed experts in compressed-tensors pack-quantized INT4
// (symmetric, groups of 32) and everything else in BF16; llm-compressor writes NVFP4 and MXFP4
// experts in the same way. The values are the generator's, quantized by a plain rounding rule;
// what matters is the layout, which is the library's (docs/FP4.md).

// The expert formats of Options.ExpertFormat.
const (
	ExpertsInt4  = "int4"  // pack-quantized INT4, symmetric, Options.ExpertGroup (default 32)
	ExpertsNVFP4 = "nvfp4" // nvfp4-pack-quantized
	ExpertsMXFP4 = "mxfp4" // mxfp4-pack-quantized
)

// ExpertFormats lists the expert formats, as flags name them.
var ExpertFormats = []string{ExpertsInt4, ExpertsNVFP4, ExpertsMXFP4}

var reRoutedExpert = regexp.MustCompile(`\.mlp\.experts\.\d+\.\w+\.weight$`)

// packedExpert reports whether tensor t is stored already quantized under options o.
func (o Options) packedExpert(t Tensor) bool {
	return o.ExpertFormat != "" && t.Kind == KindLinear && reRoutedExpert.MatchString(t.Name)
}

func (o Options) expertGroup() int64 {
	switch {
	case o.ExpertFormat == ExpertsNVFP4:
		return 16
	case o.ExpertFormat == ExpertsMXFP4:
		return 32
	case o.ExpertGroup > 0:
		return int64(o.ExpertGroup)
	}
	return 32
}

// checkExperts refuses expert formats and shapes the layout cannot hold.
func (o Options) checkExperts() error {
	if o.ExpertFormat == "" {
		return nil
	}
	switch o.ExpertFormat {
	case ExpertsInt4, ExpertsNVFP4, ExpertsMXFP4:
	default:
		return fmt.Errorf("synth: expert format %q (want %s)", o.ExpertFormat, strings.Join(ExpertFormats, ", "))
	}
	if o.FP8 {
		return fmt.Errorf("synth: expert format %s with FP8 Linears: the published checkpoints keep the rest BF16", o.ExpertFormat)
	}
	g := o.expertGroup()
	if g%8 != 0 {
		return fmt.Errorf("synth: expert group size %d: want a multiple of 8", g)
	}
	for _, t := range o.Model.Tensors() {
		if o.packedExpert(t) && t.Shape[1]%g != 0 {
			return fmt.Errorf("synth: %s: %d in features do not fill groups of %d", t.Name, t.Shape[1], g)
		}
	}
	return nil
}

// packedSpecs are the tensors of one already-quantized expert weight [N, K].
func (o Options) packedSpecs(t Tensor) []safetensors.TensorSpec {
	m := strings.TrimSuffix(t.Name, ".weight")
	n, k := t.Shape[0], t.Shape[1]
	g := o.expertGroup()
	if o.ExpertFormat == ExpertsInt4 {
		return []safetensors.TensorSpec{
			{Name: m + ".weight_packed", DType: safetensors.I32, Shape: []int64{n, k / 8}},
			{Name: m + ".weight_scale", DType: safetensors.BF16, Shape: []int64{n, k / g}},
			{Name: m + ".weight_shape", DType: safetensors.I64, Shape: []int64{2}},
		}
	}
	specs := []safetensors.TensorSpec{{Name: m + ".weight_packed", DType: safetensors.U8, Shape: []int64{n, k / 2}}}
	if o.ExpertFormat == ExpertsNVFP4 {
		return append(specs,
			safetensors.TensorSpec{Name: m + ".weight_scale", DType: safetensors.F8E4M3, Shape: []int64{n, k / g}},
			safetensors.TensorSpec{Name: m + ".weight_global_scale", DType: safetensors.F32, Shape: []int64{1}})
	}
	return append(specs, safetensors.TensorSpec{Name: m + ".weight_scale", DType: safetensors.U8, Shape: []int64{n, k / g}})
}

// packedOwner returns the expert weight a tensor of packedSpecs belongs to.
func packedOwner(name string, kinds map[string]Tensor) (Tensor, bool) {
	for _, suf := range []string{"_packed", "_scale", "_shape", "_global_scale"} {
		if t, ok := kinds[strings.TrimSuffix(name, suf)]; ok && strings.HasSuffix(name, suf) {
			return t, true
		}
	}
	return Tensor{}, false
}

// writePacked writes tensor s, one of packedSpecs(t): the whole expert is generated and
// quantized for each of its tensors, so that each lands in whatever shard the plan put it in.
func (o Options) writePacked(w *safetensors.Writer, s safetensors.TensorSpec, t Tensor) error {
	rows, cols := int(t.Shape[0]), int(t.Shape[1])
	vals := make([]float32, rows*cols)
	newValueGen(o.Seed, t).fill(vals)
	amax := absMax(vals)
	if sib, ok := fusedSibling(t); ok && o.ExpertFormat == ExpertsNVFP4 {
		sv := make([]float32, rows*cols)
		newValueGen(o.Seed, sib).fill(sv)
		amax = max(amax, absMax(sv))
	}
	q := o.quantizeExpert(vals, rows, cols, amax)
	var b []byte
	switch {
	case strings.HasSuffix(s.Name, ".weight_packed"):
		b = q.packed
	case strings.HasSuffix(s.Name, ".weight_scale"):
		b = q.scales
	case strings.HasSuffix(s.Name, ".weight_shape"):
		b = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(rows)), uint64(cols))
	case strings.HasSuffix(s.Name, ".weight_global_scale"):
		b = binary.LittleEndian.AppendUint32(nil, math.Float32bits(q.global))
	default:
		return fmt.Errorf("synth: internal: %s is no tensor of %s", s.Name, t.Name)
	}
	if err := w.WriteTensor(s.Name, b); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// quantizedExpert is an expert weight in its stored form.
type quantizedExpert struct {
	packed, scales []byte
	global         float32
}

// e2m1 are the magnitudes of the E2M1 codes 0-7.
var e2m1 = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// quantizeExpert quantizes a [rows, cols] weight in the expert format: INT4 scale bf16(amax/7.5)
// and levels round(x/s) clamped to [-8, 7]; NVFP4 global scale 448·6/amax (amax over the
// tensor and, for gate and up, its fused sibling: see fusedSibling) and group scales
// e4m3(G·amax_g/6); MXFP4 exponents floor(log2 amax_g) − 2; FP4 codes the nearest magnitude.
func (o Options) quantizeExpert(vals []float32, rows, cols int, amax float32) quantizedExpert {
	g := int(o.expertGroup())
	ng := cols / g
	var q quantizedExpert
	if o.ExpertFormat == ExpertsInt4 {
		q.packed = make([]byte, rows*cols/2)
		q.scales = make([]byte, 2*rows*ng)
		for r := range rows {
			for k := range ng {
				grp := vals[r*cols+k*g : r*cols+(k+1)*g]
				sc := floatcodec.Float32ToBF16(absMax(grp) / 7.5)
				s := floatcodec.BF16ToFloat32(sc)
				binary.LittleEndian.PutUint16(q.scales[2*(r*ng+k):], sc)
				for i, v := range grp {
					l := 0.0
					if s > 0 {
						l = min(7, max(-8, math.RoundToEven(float64(v/s))))
					}
					j := r*cols + k*g + i // element j: nibble j%8 of word j/8, little-endian
					q.packed[j/2] |= byte(int(l)+8) << (4 * (j % 2))
				}
			}
		}
		return q
	}
	q.packed = make([]byte, rows*cols/2)
	q.scales = make([]byte, rows*ng)
	if o.ExpertFormat == ExpertsNVFP4 {
		q.global = 448 * 6 / max(amax, 1e-30)
	}
	for r := range rows {
		for k := range ng {
			grp := vals[r*cols+k*g : r*cols+(k+1)*g]
			amax := absMax(grp)
			var s float32
			if o.ExpertFormat == ExpertsNVFP4 {
				c := floatcodec.Float32ToF8E4M3(q.global * amax / 6)
				q.scales[r*ng+k], s = c, floatcodec.F8E4M3ToFloat32(c)/q.global
			} else {
				e := 0
				if amax > 0 {
					e = min(254, max(0, 127+int(math.Floor(math.Log2(float64(amax))))-2))
				}
				q.scales[r*ng+k], s = byte(e), float32(math.Ldexp(1, e-127))
			}
			for i, v := range grp {
				code := byte(0)
				if s > 0 {
					code = nearestE2M1(v / s)
				}
				j := r*cols + k*g + i
				q.packed[j/2] |= code << (4 * (j % 2))
			}
		}
	}
	return q
}

// fusedSibling is the projection an engine fuses with expert weight t (up for gate, gate for up,
// w3 for w1 and back): NVFP4 gives the pair one global scale, from the larger of their maxima,
// as llm-compressor does and the engines' fused w13 GEMM needs.
func fusedSibling(t Tensor) (Tensor, bool) {
	for _, p := range [][2]string{{"gate_proj", "up_proj"}, {"up_proj", "gate_proj"}, {"w1", "w3"}, {"w3", "w1"}} {
		if pre, ok := strings.CutSuffix(t.Name, "."+p[0]+".weight"); ok {
			return Tensor{Name: pre + "." + p[1] + ".weight", Shape: t.Shape, Kind: t.Kind}, true
		}
	}
	return Tensor{}, false
}

// nearestE2M1 is the E2M1 code nearest to x (the sign in bit 3).
func nearestE2M1(x float32) byte {
	a, best := float32(math.Abs(float64(x))), 0
	for i, v := range e2m1 {
		if math.Abs(float64(v-a)) < math.Abs(float64(e2m1[best]-a)) {
			best = i
		}
	}
	code := byte(best)
	if x < 0 && best > 0 {
		code |= 8
	}
	return code
}

func absMax(v []float32) float32 {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	return m
}

// configJSON is the model's config.json, with the compressed-tensors quantization_config of
// the experts' format when they are stored quantized (every other Linear ignored).
func (o Options) configJSON() ([]byte, error) {
	b, err := o.Model.ConfigJSON(o.FP8)
	if err != nil || o.ExpertFormat == "" {
		return b, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var c map[string]any
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	w := map[string]any{"num_bits": 4, "symmetric": true, "dynamic": false, "actorder": nil, "block_structure": nil,
		"observer": "minmax", "observer_kwargs": map[string]any{}, "strategy": "group", "group_size": o.expertGroup()}
	format := "pack-quantized"
	switch o.ExpertFormat {
	case ExpertsInt4:
		w["type"] = "int"
	case ExpertsNVFP4:
		w["type"], w["strategy"], w["scale_dtype"], w["zp_dtype"] = "float", "tensor_group", "torch.float8_e4m3fn", nil
		format = "nvfp4-pack-quantized"
	case ExpertsMXFP4:
		w["type"], w["scale_dtype"], w["zp_dtype"] = "float", "torch.uint8", nil
		format = "mxfp4-pack-quantized"
	}
	c["quantization_config"] = map[string]any{
		"quant_method": "compressed-tensors", "format": format, "quantization_status": "compressed",
		"config_groups": map[string]any{"group_0": map[string]any{
			"targets": []string{"Linear"}, "weights": w, "input_activations": nil, "output_activations": nil, "format": format,
		}},
		"ignore":          []string{"lm_head", `re:.*self_attn.*`, `re:.*shared_experts.*`, `re:.*mlp\.(gate_up|gate|up|down)_proj$`, `re:.*eh_proj$`, `re:.*shared_head\.head$`},
		"kv_cache_scheme": nil,
	}
	return json.MarshalIndent(c, "", "  ")
}
