package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/quantize/engines"
	"pdq/quantize/report"
	"pdq/safetensors"
)

// fp4Encoding is compressed-tensors nvfp4- or mxfp4-pack-quantized (docs/FP4.md): E2M1 codes two
// per byte, one scale per group of 16 (NVFP4: e4m3 under an F32 global scale shared by an
// expert's gate and up projections) or 32 (MXFP4: E8M0 exponents) input features, chosen by
// Options.Method (rtn: compressed-tensors' rule; mse: the scale search).
type fp4Encoding struct {
	scheme Scheme
	format quantize.PackedFormat
	group  int    // the format's group size
	key    string // its config group's key
}

// The FP4 decode formats and their schemes.
const (
	DecodeNVFP4 DecodeFormat = "nvfp4" // compressed-tensors nvfp4-pack-quantized (docs/FP4.md)
	DecodeMXFP4 DecodeFormat = "mxfp4" // compressed-tensors mxfp4-pack-quantized (docs/FP4.md)

	SchemeNVFP4 Scheme = "nvfp4" // E2M1, e4m3 scale per 16, F32 global scale
	SchemeMXFP4 Scheme = "mxfp4" // E2M1, E8M0 scale per 32
)

var (
	nvfp4Encoding = fp4Encoding{scheme: SchemeNVFP4, format: quantize.PackedNVFP4, group: kernels.NVFP4GroupSize, key: "nvfp4"}
	mxfp4Encoding = fp4Encoding{scheme: SchemeMXFP4, format: quantize.PackedMXFP4, group: kernels.MXFP4GroupSize, key: "mxfp4"}
)

func init() {
	register(nvfp4Encoding)
	register(mxfp4Encoding)
	registerFormat(FormatInfo{
		Format: DecodeNVFP4, Title: "NVFP4", Scheme: SchemeNVFP4, FixedGroup: kernels.NVFP4GroupSize,
		Layout:  "nvfp4-pack-quantized: E2M1, e4m3 scale per 16, F32 global scale shared by an expert's gate and up",
		GPUs:    "weight-only through FP4 Marlin from Ampere on (vLLM; SGLang's recent weight-only scheme)",
		Engine:  engines.FormatNVFP4,
		Tensors: nvfp4Encoding.tensors,
		Report:  report.SchemeInfo{Family: report.FamilyFP4, Quantized: true, Stored: storedFrom(nvfp4Encoding.tensors, kernels.NVFP4GroupSize)},
		Compare: &CompareInfo{
			Doc:       "E2M1 in groups of 16 with e4m3 scales and a global scale, 4.5 bits per weight",
			Note:      "NVFP4 uses one global scale for an expert's gate and up projections together, as the engines' fused GEMM expects (their values are read twice for it).",
			ScaleBits: 8, Shared: kernels.NVFP4GlobalScale, Measure: nvfp4Encoding.measure,
		},
	}, 10)
	registerFormat(FormatInfo{
		Format: DecodeMXFP4, Title: "MXFP4", Scheme: SchemeMXFP4, FixedGroup: kernels.MXFP4GroupSize,
		Layout:  "mxfp4-pack-quantized: E2M1, power-of-two scale per 32",
		GPUs:    "Marlin from Ampere on, vLLM and SGLang",
		Engine:  engines.FormatMXFP4,
		Tensors: mxfp4Encoding.tensors,
		Report:  report.SchemeInfo{Family: report.FamilyFP4, Quantized: true, Stored: storedFrom(mxfp4Encoding.tensors, kernels.MXFP4GroupSize)},
		Compare: &CompareInfo{
			Doc:       "E2M1 in groups of 32 with power-of-two scales, 4.25 bits",
			ScaleBits: 8, Measure: mxfp4Encoding.measure,
		},
	}, 20)
}

// tensors are the format's tensors for a rows×cols weight: the E2M1 codes two per byte, a scale
// per group (e4m3 for NVFP4, E8M0 for MXFP4) and NVFP4's F32 global scale.
func (e fp4Encoding) tensors(rows, cols, group int64) []TensorShape {
	ts := []TensorShape{{suffixPacked[1:], safetensors.U8, []int64{rows, cols / 2}}}
	if e.format == quantize.PackedMXFP4 {
		return append(ts, TensorShape{suffixScale[1:], safetensors.U8, []int64{rows, cols / group}})
	}
	return append(ts, TensorShape{suffixScale[1:], safetensors.F8E4M3, []int64{rows, cols / group}},
		TensorShape{suffixGlobal[1:], safetensors.F32, []int64{1}})
}

// measure is how pdq compare measures the format (CompareInfo.Measure): the conversion's
// quantizer and error sums on one slab, global the NVFP4 global scale.
func (e fp4Encoding) measure(ctx context.Context, met *quantize.Metrics, vals []float32, rows, cols, firstRow int, first int64, method quantize.Method, global float32) error {
	opt := quantize.FP4Options{Format: e.format, Method: method, Workers: 1, FirstRow: firstRow}
	if e.format == quantize.PackedNVFP4 {
		opt.Global = global
	}
	q, err := quantize.QuantizeFP4(ctx, vals, rows, cols, opt)
	if err != nil {
		return err
	}
	if err := met.AddFP4(vals, q, first); err != nil {
		return err
	}
	met.Clipped += q.Clipped
	return nil
}

func (e fp4Encoding) Scheme() Scheme { return e.scheme }

func (e fp4Encoding) Bind(m *Module, kind OutputKind, o *Options) Bound {
	return &fp4Bound{enc: e, m: m, kind: kind, o: o}
}

// unfit: the in features must fill whole groups.
func (e fp4Encoding) unfit(m *Module, _ *Options) string {
	switch {
	case m.Cols == 0:
		return "no in features"
	case m.Cols%e.group != 0:
		return fmt.Sprintf("in features %d not a multiple of the %s group size %d", m.Cols, e.format, e.group)
	}
	return ""
}

// ctGroup is the config group compressed-tensors' NVFP4A16 and MXFP4A16 presets give
// (docs/FP4.md, "Config groups"): weights only, the MX semantics marked by the uint8 scale dtype.
func (e fp4Encoding) ctGroup(*Options) (key, format string, group map[string]any) {
	strategy, scale := "tensor_group", "torch.float8_e4m3fn"
	if e.format == quantize.PackedMXFP4 {
		strategy, scale = "group", "torch.uint8"
	}
	w := map[string]any{
		"num_bits": 4, "type": "float", "symmetric": true, "group_size": e.group, "strategy": strategy,
		"block_structure": nil, "dynamic": false, "actorder": nil, "scale_dtype": scale, "zp_dtype": nil,
		"observer": "minmax", "observer_kwargs": map[string]any{},
	}
	f := e.format.String()
	return e.key, f, map[string]any{"format": f, "weights": w, "input_activations": nil, "output_activations": nil}
}

// readGroup recognises the encoding's config group in an output's config.json.
func (e fp4Encoding) readGroup(g map[string]any, o *Options) bool {
	if f, _ := g["format"].(string); f != e.format.String() {
		return false
	}
	o.DecodeFormat = decodeFormatOf(e.scheme)
	return true
}

// decodeFormatOf is the decode format whose targets take scheme s.
func decodeFormatOf(s Scheme) DecodeFormat {
	for _, f := range DecodeFormats {
		o := Options{DecodeFormat: f}
		if o.targetScheme() == s {
			return f
		}
	}
	return ""
}

// CPU ns per weight of the FP4 encoders (quantize and error sums; AVX-512, docs/FP4.md), and of
// reading and decoding gate and up once more for NVFP4's shared global scale.
const (
	nsNVFP4RTN    = 5
	nsNVFP4MSE    = 13
	nsMXFP4RTN    = 4
	nsMXFP4MSE    = 7
	nsGlobalPass  = 1
	suffixGlobal  = ".weight_global_scale" // NVFP4: F32 [1]
	fp4GlobalSize = 4
)

// fp4Bound is an FP4 format bound to one module and output.
type fp4Bound struct {
	enc  fp4Encoding
	m    *Module
	kind OutputKind
	o    *Options
}

func (b *fp4Bound) Scheme() Scheme { return b.enc.scheme }

func (b *fp4Bound) nv() bool { return b.enc.format == quantize.PackedNVFP4 }

func (b *fp4Bound) Specs() []safetensors.TensorSpec {
	n, k := int64(b.m.Rows), int64(b.m.Cols)
	scale := safetensors.U8
	if b.nv() {
		scale = safetensors.F8E4M3
	}
	specs := []safetensors.TensorSpec{
		{Name: b.m.Name + suffixPacked, DType: safetensors.U8, Shape: []int64{n, k / 2}},
		{Name: b.m.Name + suffixScale, DType: scale, Shape: []int64{n, k / int64(b.enc.group)}},
	}
	if b.nv() {
		specs = append(specs, safetensors.TensorSpec{Name: b.m.Name + suffixGlobal, DType: safetensors.F32, Shape: []int64{1}})
	}
	return specs
}

func (b *fp4Bound) ValueTensor() string {
	if b.kind != KindDecode {
		return ""
	}
	return b.m.Name + suffixPacked
}

func (b *fp4Bound) Copied() []string   { return nil }
func (b *fp4Bound) Values() bool       { return true }
func (b *fp4Bound) ChecksFinite() bool { return true } // each group's absolute maximum
func (b *fp4Bound) Bands() bool        { return true }

func (b *fp4Bound) Cost() float64 {
	rtn := b.o.Method == quantize.MethodRTN
	var ns float64
	switch {
	case b.nv() && rtn:
		ns = nsNVFP4RTN
	case b.nv():
		ns = nsNVFP4MSE
	case rtn:
		ns = nsMXFP4RTN
	default:
		ns = nsMXFP4MSE
	}
	if b.nv() && siblingOf(b.m.Name) != "" {
		ns += 2 * nsGlobalPass // both of the pair read once more
	}
	return float64(b.m.Weight.NumElements()) * ns * 1e-9
}

func (b *fp4Bound) Dequantize(dst []float32, read TensorReader) (string, error) {
	m := b.m
	packed, _, err := read(m.Name + suffixPacked)
	if err != nil {
		return "", err
	}
	scales, _, err := read(m.Name + suffixScale)
	if err != nil {
		return "", err
	}
	var global float32
	if b.nv() {
		gb, _, err := read(m.Name + suffixGlobal)
		if err != nil {
			return "", err
		}
		if len(gb) != fp4GlobalSize {
			return fmt.Sprintf("tensor %q holds %d bytes, want one F32", m.Name+suffixGlobal, len(gb)), nil
		}
		global = math.Float32frombits(binary.LittleEndian.Uint32(gb))
		if !(global > 0) || math.IsInf(float64(global), 0) {
			return fmt.Sprintf("tensor %q holds %v, want a positive finite global scale", m.Name+suffixGlobal, global), nil
		}
	}
	if err := quantize.DequantizeFP4(dst, b.enc.format, packed, scales, global, m.Rows, m.Cols); err != nil {
		return fmt.Sprintf("tensor %q: %v", m.Name+suffixPacked, err), nil
	}
	return "", nil
}

// annotate adds to an FP4 report row what compressed-tensors' rule would have given, the group
// size and the method.
func (b *fp4Bound) annotate(rec *record, outs []outResult) {
	var rtnTotal quantize.Metrics
	for i := range outs {
		rtnTotal.Merge(outs[i].rtn)
	}
	v := report.Float(rtnTotal.SQNR())
	rec.Row.RTNSQNR, rec.RTN = &v, &rtnTotal
	rec.Row.GroupSize, rec.Row.Method = b.enc.group, string(b.o.Method)
}

func (b *fp4Bound) newEncoder() encoder { return &fp4Encoder{} }

// fp4Encoder quantizes a slab band by band and measures each band while it is in cache; the
// slab's codes and scales (and, with its first rows, NVFP4's global scale) are written at its end.
type fp4Encoder struct {
	j     *job
	b     *fp4Bound
	res   quantize.FP4Result // storage reused slab after slab
	bands quantize.FP4Bands
}

func (e *fp4Encoder) begin(ctx context.Context, j *job) error {
	e.j, e.b = j, j.b.(*fp4Bound)
	opt := quantize.FP4Options{Format: e.b.enc.format, Method: e.b.o.Method, Workers: 1, FirstRow: j.s.r0, Global: 1}
	if e.b.nv() && !j.wk.null {
		globals := j.wk.r.shared.get("fp4-globals", func() any { return new(fp4Globals) }).(*fp4Globals)
		g, err := globals.get(ctx, j.wk.r.plan, j.m)
		if err != nil {
			return err
		}
		opt.Global = g
	}
	if err := e.bands.Begin(&e.res, j.rows(), j.m.Cols, opt); err != nil {
		return fmt.Errorf("convert: %s: %w", j.m.describe(), err)
	}
	return nil
}

func (e *fp4Encoder) add(ctx context.Context, band *slab, vals []float32) error {
	if e.j.wk.null {
		return nil
	}
	if err := e.bands.Add(ctx, vals, band.r1-band.r0); err != nil {
		return fmt.Errorf("convert: %s: %w", e.j.m.describe(), err)
	}
	return nil
}

func (e *fp4Encoder) end(context.Context) error {
	j := e.j
	m, s, q := j.m, j.s, &e.res
	if !j.wk.null {
		if err := e.bands.End(&j.out.met, j.base()); err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
	}
	if err := j.set.write(m.Name+suffixPacked, int64(s.r0)*int64(m.Cols/2), q.Packed); err != nil {
		return err
	}
	if err := j.set.write(m.Name+suffixScale, int64(s.r0)*int64(m.Cols/e.b.enc.group), q.Scales); err != nil {
		return err
	}
	if e.b.nv() && s.r0 == 0 {
		var g [fp4GlobalSize]byte
		binary.LittleEndian.PutUint32(g[:], math.Float32bits(q.Global))
		if err := j.set.write(m.Name+suffixGlobal, 0, g[:]); err != nil {
			return err
		}
	}
	if j.wk.null {
		return nil
	}
	j.out.met.Clipped += q.Clipped
	j.out.rtn = quantize.Metrics{N: int64(q.Rows) * int64(q.Cols), SumSqRef: q.SumSq, SumSqErr: q.RTNSumSqErr}
	return nil
}
