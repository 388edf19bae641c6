package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"pdq/quantize"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// Sources already quantized (docs/FP4.md, "Sources already quantized"): compressed-tensors
// pack-quantized INT4 (symmetric or asymmetric, any group), nvfp4- and mxfp4-pack-quantized, and
// ModelOpt NVFP4. Each packed module becomes a Linear module whose source values are decoded
// exactly to float32 slab by slab (quantize.PackedLayout.Decode): the prefill output gets FP8
// blocks of them and the decode output re-quantizes them, or writes the source's tensors
// through unchanged when it asks for the source's own format with the same parameters.

// ErrPackedSource: an already-quantized module whose tensors do not fit its format (a missing
// companion, a dtype or shape that does not fit, a config.json that declares another format).
// The error also wraps the decoder's sentinel (quantize.ErrBadShape,
// safetensors.ErrUnsupportedDType) when there is one.
var ErrPackedSource = errors.New("malformed already-quantized module")

// Tensor name suffixes of already-quantized sources (beside suffixPacked, suffixScale and
// suffixWeightShape).
const (
	suffixZeroPoint   = ".weight_zero_point"   // asymmetric INT4 zero points, packed along the rows
	suffixGlobalScale = ".weight_global_scale" // NVFP4: G = 448·6/amax, F32 [1]
	suffixScale2      = ".weight_scale_2"      // ModelOpt NVFP4: a multiplier, F32 [] or [1]
)

// activationCompanions are the static activation scales an already-quantized source may hold
// beside a module's weight; no output pdq writes quantizes activations statically, so they are
// dropped with their module.
var activationCompanions = []string{".input_global_scale", ".input_scale", ".output_scale"}

// packedSource is the source of a module that arrives already quantized: its layout and tensors.
type packedSource struct {
	layout quantize.PackedLayout
	packed *safetensors.Tensor // weight_packed, or ModelOpt's weight
	scale  *safetensors.Tensor // weight_scale
	zero   *safetensors.Tensor // weight_zero_point (asymmetric INT4), or nil
	shape  *safetensors.Tensor // weight_shape (INT4), or nil
	global *safetensors.Tensor // weight_global_scale (NVFP4) or weight_scale_2 (ModelOpt), or nil
}

// tensors lists the source tensors of the module, packed codes first.
func (ps *packedSource) tensors() []*safetensors.Tensor {
	ts := []*safetensors.Tensor{ps.packed, ps.scale}
	for _, t := range []*safetensors.Tensor{ps.zero, ps.shape, ps.global} {
		if t != nil {
			ts = append(ts, t)
		}
	}
	return ts
}

// scaleRowBytes is the bytes of weight_scale per weight row.
func (ps *packedSource) scaleRowBytes() int64 {
	return ps.scale.ByteSize() / max(ps.scale.Shape[0], 1)
}

// zeroRows returns the rows of weight_zero_point that weight rows [r0, r1) use (r0 a multiple
// of 8), and the bytes per row.
func (ps *packedSource) zeroRows(r0, r1 int) (z0, z1, rowBytes int64) {
	return int64(r0) / 8, ceilDiv(int64(r1), 8), ps.zero.ByteSize() / max(ps.zero.Shape[0], 1)
}

// packedRaw holds, beside a slab's packed codes (slab.raw), the bytes of the module's other
// source tensors the slab uses: its rows of weight_scale and weight_zero_point, and the small
// weight_shape and global scale tensors whole.
type packedRaw struct {
	scales, zero, shape, global []byte
}

// findPacked finds the already-quantized modules of a checkpoint: the packed tensor of each
// (weight_packed, or a ModelOpt U8 weight beside a weight_scale_2) mapped to its source, and
// every companion tensor the modules consume (marked in companion).
func (p *Plan) findPacked(ts []*safetensors.Tensor, byName map[string]*safetensors.Tensor, companion map[string]bool) (map[string]*packedSource, error) {
	declared, err := declaredFormats(p.Source.Dir, p.Config)
	if err != nil {
		return nil, err
	}
	found := map[string]*packedSource{}
	for _, t := range ts {
		module, suffix := rules.ModuleOf(t.Name)
		var f quantize.PackedFormat
		switch {
		case suffix == "weight_packed" && t.DType == safetensors.U8 && byName[module+suffixGlobalScale] != nil:
			f = quantize.PackedNVFP4
		case suffix == "weight_packed" && t.DType == safetensors.U8:
			f = quantize.PackedMXFP4
		case suffix == "weight_packed":
			f = quantize.PackedInt4
		case suffix == "weight" && byName[module+suffixScale2] != nil:
			f = quantize.PackedModelOptNVFP4
		default:
			continue
		}
		fail := func(err error) error {
			return fmt.Errorf("convert: %s: module %q (%s): %w: %w", t.Shard.Name, module, f, ErrPackedSource, err)
		}
		if declared != nil && !declared[f] {
			return nil, fail(fmt.Errorf("config.json declares %s, not %s", strings.Join(formatNames(declared), ", "), f))
		}
		ps, err := inspectPacked(f, module, t, byName)
		if err != nil {
			return nil, fail(err)
		}
		found[t.Name] = ps
		for _, c := range ps.tensors()[1:] {
			companion[c.Name] = true
		}
		for _, suf := range activationCompanions {
			if c := byName[module+suf]; c != nil {
				companion[c.Name] = true
			}
		}
	}
	return found, nil
}

// inspectPacked checks the tensors of one already-quantized module of format f from their
// header entries and returns its source.
func inspectPacked(f quantize.PackedFormat, module string, packed *safetensors.Tensor, byName map[string]*safetensors.Tensor) (*packedSource, error) {
	ps := &packedSource{packed: packed, scale: byName[module+suffixScale]}
	need := func(suffix string) (*safetensors.Tensor, error) {
		t := byName[module+suffix]
		if t == nil {
			return nil, fmt.Errorf("no tensor %s%s", module, suffix)
		}
		return t, nil
	}
	var err error
	if ps.scale, err = need(suffixScale); err != nil {
		return nil, err
	}
	meta := func(t *safetensors.Tensor) quantize.TensorMeta {
		return quantize.TensorMeta{DType: t.DType, Shape: t.Shape}
	}
	switch f {
	case quantize.PackedInt4:
		if ps.shape, err = need(suffixWeightShape); err != nil {
			return nil, err
		}
		if (ps.shape.DType != safetensors.I64 && ps.shape.DType != safetensors.I32) || len(ps.shape.Shape) != 1 || ps.shape.Shape[0] != 2 {
			return nil, fmt.Errorf("tensor %q is %s %v, want I64 [2]: %w", ps.shape.Name, ps.shape.DType, ps.shape.Shape, quantize.ErrBadShape)
		}
		var zp *quantize.TensorMeta
		if ps.zero = byName[module+suffixZeroPoint]; ps.zero != nil {
			z := meta(ps.zero)
			zp = &z
		}
		// weight_shape's values are read with the data (and checked against these); the header
		// gives [N, 8·packed columns], the only shape packed words of that size hold.
		var ws []int64
		if len(packed.Shape) == 2 {
			ws = []int64{packed.Shape[0], 8 * packed.Shape[1]}
		}
		ps.layout, err = quantize.InspectPackedInt4(meta(packed), meta(ps.scale), zp, ws)
	case quantize.PackedNVFP4, quantize.PackedModelOptNVFP4:
		suffix := suffixGlobalScale
		if f == quantize.PackedModelOptNVFP4 {
			suffix = suffixScale2
		}
		if ps.global, err = need(suffix); err != nil {
			return nil, err
		}
		ps.layout, err = quantize.InspectFP4(f, meta(packed), meta(ps.scale), meta(ps.global))
	default:
		ps.layout, err = quantize.InspectFP4(f, meta(packed), meta(ps.scale), quantize.TensorMeta{})
	}
	if err != nil {
		return nil, err
	}
	return ps, nil
}

// declaredFormats returns the packed formats config.json (or ModelOpt's hf_quant_config.json
// beside it) declares, nil when it declares none: a source without a quantization_config is
// read from its tensors alone. A quantization pdq does not read is ErrQuantizedSource.
func declaredFormats(dir string, cfg map[string]any) (map[quantize.PackedFormat]bool, error) {
	qc := rules.QuantizationConfig(cfg)
	method, _ := qc["quant_method"].(string)
	if qc == nil || method == "" {
		if hf := filepath.Join(dir, "hf_quant_config.json"); dir != "" {
			if c, err := rules.LoadConfigFile(hf); err == nil {
				qc, _ = c["quantization"].(map[string]any)
				method = "modelopt"
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("convert: %w", err)
			}
		}
	}
	out := map[quantize.PackedFormat]bool{}
	switch method {
	case "", "fp8":
		return nil, nil
	case "compressed-tensors":
		formats := []any{qc["format"]}
		groups, _ := qc["config_groups"].(map[string]any)
		for _, g := range groups {
			if gm, ok := g.(map[string]any); ok {
				formats = append(formats, gm["format"])
			}
		}
		for _, v := range formats {
			switch s, _ := v.(string); s {
			case "pack-quantized":
				out[quantize.PackedInt4] = true
			case "nvfp4-pack-quantized":
				out[quantize.PackedNVFP4] = true
			case "mxfp4-pack-quantized":
				out[quantize.PackedMXFP4] = true
			case "float-quantized", "naive-quantized", "mixed-precision", "dense", "":
				// FP8 modules (read as today), unquantized ones, or a mixture named per group
			default:
				return nil, fmt.Errorf("%w: compressed-tensors format %q (pdq reads pack-quantized INT4, nvfp4-pack-quantized, mxfp4-pack-quantized and float-quantized FP8)", ErrQuantizedSource, s)
			}
		}
	case "modelopt":
		algo, _ := qc["quant_algo"].(string)
		switch strings.ToUpper(algo) {
		case "NVFP4":
			out[quantize.PackedModelOptNVFP4] = true
		case "FP8":
			return nil, nil
		default:
			return nil, fmt.Errorf("%w: ModelOpt quant_algo %q (pdq reads NVFP4 and FP8)", ErrQuantizedSource, algo)
		}
	default:
		return nil, fmt.Errorf("%w: quant_method %q (pdq reads BF16, F16, F32 and FP8 weights, compressed-tensors pack-quantized INT4, NVFP4 and MXFP4, and ModelOpt NVFP4)", ErrQuantizedSource, method)
	}
	if len(out) == 0 {
		return nil, nil // compressed-tensors FP8 or dense groups only: no packed module expected
	}
	return out, nil
}

// formatNames lists the formats of a set, sorted.
func formatNames(set map[quantize.PackedFormat]bool) []string {
	var s []string
	for f := range set {
		s = append(s, f.String())
	}
	slices.Sort(s)
	return s
}

// newPackedModule makes the Linear module of an already-quantized source.
func newPackedModule(t *safetensors.Tensor, ps *packedSource) *Module {
	module, _ := rules.ModuleOf(t.Name)
	m := &Module{Name: module, Role: rules.RoleOf(t.Name), Linear: true, Weight: t, Packed: ps,
		Rows: ps.layout.Rows, Cols: ps.layout.Cols}
	for _, kind := range outputKinds {
		m.setScheme(kind, SchemeCopy) // as every module starts; packedSchemes makes these BF16
	}
	return m
}

// packedSchemes settles the schemes of an already-quantized module after chooseSchemes: its
// bytes are never copied as they are (they would sit in an output without their config group),
// so what would be copied is BF16; a decode target asked in the source's own format with the
// same parameters passes through (SchemePassed).
func (p *Plan) packedSchemes(m *Module) {
	for _, kind := range outputKinds {
		if m.Scheme(kind) == SchemeCopy {
			m.setScheme(kind, SchemeBF16)
		}
	}
	if m.Scheme(KindDecode) == p.Options.targetScheme() && passesThrough(m.Packed, &p.Options) {
		m.setScheme(KindDecode, SchemePassed)
	}
}

// passesThrough reports whether a decode output of options o holds the source's tensors as they
// are: INT4 asked with the source's group size, symmetric, BF16 scales (what pdq writes and
// declares), or W4AFP8 (the same tensors in groups of 128); NVFP4 or MXFP4 asked of a
// compressed-tensors source of that format.
func passesThrough(ps *packedSource, o *Options) bool {
	l := ps.layout
	int4 := l.Format == quantize.PackedInt4 && !l.Asymmetric && l.ScaleDType == safetensors.BF16
	switch o.decodeFormat() {
	case DecodeInt4:
		return int4 && o.GroupSize != PerChannel && o.GroupSize == l.GroupSize
	case DecodeW4AFP8:
		return int4 && l.GroupSize == 128
	case DecodeNVFP4:
		return l.Format == quantize.PackedNVFP4
	case DecodeMXFP4:
		return l.Format == quantize.PackedMXFP4 && ps.scale.DType == safetensors.U8
	}
	return false
}

// readPacked reads, beside the packed codes, the rows of module m's other source tensors that
// slab s uses.
func (r *runner) readPacked(m *Module, s *slab) error {
	raw, err := readPackedRows(func(t *safetensors.Tensor, dst []byte, off int64) error {
		return r.plan.Source.ReadTensorAt(t, dst, off)
	}, m.Packed, s.r0, s.r1)
	s.packed = raw
	return err
}

// readPackedRows reads the companions' bytes for weight rows [r0, r1) with read.
func readPackedRows(read func(t *safetensors.Tensor, dst []byte, off int64) error, ps *packedSource, r0, r1 int) (*packedRaw, error) {
	raw := &packedRaw{}
	srow := ps.scaleRowBytes()
	raw.scales = make([]byte, int64(r1-r0)*srow)
	if err := read(ps.scale, raw.scales, int64(r0)*srow); err != nil {
		return nil, err
	}
	if ps.zero != nil {
		z0, z1, zrow := ps.zeroRows(r0, r1)
		raw.zero = make([]byte, (z1-z0)*zrow)
		if err := read(ps.zero, raw.zero, z0*zrow); err != nil {
			return nil, err
		}
	}
	for _, x := range []struct {
		t   *safetensors.Tensor
		dst *[]byte
	}{{ps.shape, &raw.shape}, {ps.global, &raw.global}} {
		if x.t == nil {
			continue
		}
		*x.dst = make([]byte, x.t.ByteSize())
		if err := read(x.t, *x.dst, 0); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// band returns the companions' bytes of rows [a, b) of a slab starting at row r0 (a a multiple
// of 8 beyond r0, r0 itself a multiple of 8).
func (pr *packedRaw) band(ps *packedSource, r0, a, b int) *packedRaw {
	srow := ps.scaleRowBytes()
	out := &packedRaw{scales: pr.scales[int64(a-r0)*srow : int64(b-r0)*srow], shape: pr.shape, global: pr.global}
	if ps.zero != nil {
		s0, _, zrow := ps.zeroRows(r0, r0)
		z0, z1, _ := ps.zeroRows(a, b)
		out.zero = pr.zero[(z0-s0)*zrow : (z1-s0)*zrow]
	}
	return out
}

// decodePacked decodes slab s of an already-quantized module exactly to float32.
func decodePacked(dst []float32, m *Module, s *slab) error {
	ps, raw := m.Packed, s.packed
	if raw == nil {
		return fmt.Errorf("tensor %q: internal: slab without its companions", m.Weight.Name)
	}
	in := quantize.PackedSlab{Packed: s.raw, Scales: raw.scales, ZeroPoint: raw.zero}
	if ps.shape != nil {
		shape, err := quantize.ParseWeightShape(raw.shape, ps.shape.DType)
		if err != nil {
			return fmt.Errorf("%w: tensor %q: %w", ErrPackedSource, ps.shape.Name, err)
		}
		if len(shape) != 2 || shape[0] != int64(m.Rows) || shape[1] != int64(m.Cols) {
			return fmt.Errorf("%w: tensor %q holds %v for weight_packed %v, want [%d, %d]: %w",
				ErrPackedSource, ps.shape.Name, shape, ps.packed.Shape, m.Rows, m.Cols, quantize.ErrBadShape)
		}
	}
	if ps.global != nil {
		v, err := quantize.ParseTensorScale(raw.global, ps.global.DType)
		if err != nil {
			return fmt.Errorf("%w: tensor %q: %w", ErrPackedSource, ps.global.Name, err)
		}
		in.Scale = v
	}
	if err := ps.layout.Decode(dst, s.r1-s.r0, in); err != nil {
		return fmt.Errorf("%w: module %s rows %d-%d: %w", ErrPackedSource, m.Name, s.r0, s.r1, err)
	}
	return nil
}

// values is the number of values of module m, what the encodings' costs count: Rows×Cols for a
// Linear module (an already-quantized weight holds fewer elements than values), its weight's
// elements otherwise.
func (m *Module) values() int64 {
	if m.Linear {
		return int64(m.Rows) * int64(m.Cols)
	}
	return m.Weight.NumElements()
}

// SourceInt4Group is the group size of module m's source when it arrives as pack-quantized
// INT4 (what a planner needs to serve the source as it is), 0 otherwise.
func (m *Module) SourceInt4Group() int {
	if m.Packed == nil || m.Packed.layout.Format != quantize.PackedInt4 {
		return 0
	}
	return m.Packed.layout.GroupSize
}

// SourcesRead says what pdq reads as a source, for messages: the dense dtypes and the
// already-quantized layouts of this file.
const SourcesRead = "BF16, F16, F32 and FP8 weights, compressed-tensors pack-quantized INT4, nvfp4- and mxfp4-pack-quantized experts, and ModelOpt NVFP4"

// QuantizedSources names the already-quantized sources pdq reads, for help: the layouts of this
// file and the checkpoints that ship them.
const QuantizedSources = "compressed-tensors pack-quantized INT4 experts (Kimi K2-Thinking, K2.6), nvfp4- or mxfp4-pack-quantized ones, or ModelOpt NVFP4"
