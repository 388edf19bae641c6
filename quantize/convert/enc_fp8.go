package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"pdq/quantize"
	"pdq/safetensors"
)

// fp8BlockEncoding is FP8 e4m3 in FP8BlockSize×FP8BlockSize blocks with one F32 multiplier per
// block (docs/FORMATS.md, "Prefill checkpoint"), quantized from dense values: the block scales
// are weight_scale_inv in the prefill checkpoint (DeepSeek naming) and weight_scale in the decode
// checkpoint (compressed-tensors naming).
type fp8BlockEncoding struct{}

func init() { register(fp8BlockEncoding{}) }

func (fp8BlockEncoding) Scheme() Scheme { return SchemeFP8Block }

func (fp8BlockEncoding) Bind(m *Module, kind OutputKind, _ *Options) Bound {
	return &fp8Bound{m: m, kind: kind}
}

// ctGroup is the compressed-tensors config group of the FP8 block modules (quantized here or
// kept from an FP8 source): block weights with dynamic per-group FP8 activations.
func (fp8BlockEncoding) ctGroup(*Options) (key, format string, group map[string]any) {
	return fp8CTGroup()
}

func fp8CTGroup() (key, format string, group map[string]any) {
	return "fp8", "float-quantized", map[string]any{
		"format": "float-quantized",
		"weights": map[string]any{
			"num_bits": 8, "type": "float", "symmetric": true, "strategy": "block",
			"block_structure": []int{FP8BlockSize, FP8BlockSize}, "group_size": nil, "dynamic": false,
			"actorder": nil, "observer": "minmax", "observer_kwargs": map[string]any{},
		},
		"input_activations": map[string]any{
			"num_bits": 8, "type": "float", "symmetric": true, "strategy": "group", "group_size": FP8BlockSize,
			"dynamic": true, "actorder": nil, "observer": nil, "observer_kwargs": map[string]any{},
		},
		"output_activations": nil,
	}
}

// fp8Bound is FP8 blocks bound to one module and output.
type fp8Bound struct {
	m    *Module
	kind OutputKind
}

func (b *fp8Bound) Scheme() Scheme { return SchemeFP8Block }

func (b *fp8Bound) Specs() []safetensors.TensorSpec {
	n, k := int64(b.m.Rows), int64(b.m.Cols)
	return []safetensors.TensorSpec{
		{Name: b.m.Name + suffixWeight, DType: safetensors.F8E4M3, Shape: []int64{n, k}},
		{Name: b.scaleName(), DType: safetensors.F32, Shape: []int64{ceilDiv(n, FP8BlockSize), ceilDiv(k, FP8BlockSize)}},
	}
}

// scaleName is the name of the block scales: the DeepSeek name in prefill (what SGLang's and
// vLLM's DeepSeek loaders read), the compressed-tensors name in decode.
func (b *fp8Bound) scaleName() string {
	if b.kind == KindPrefill {
		return b.m.Name + suffixScaleInv
	}
	return b.m.Name + suffixScale
}

func (b *fp8Bound) ValueTensor() string { return b.m.Name + suffixWeight }
func (b *fp8Bound) Copied() []string    { return nil }
func (b *fp8Bound) Values() bool        { return true }
func (b *fp8Bound) ChecksFinite() bool  { return true } // each block's absolute maximum
func (b *fp8Bound) Bands() bool         { return true }

func (b *fp8Bound) Cost() float64 { return float64(b.m.values()) * nsFP8Block * 1e-9 }

func (b *fp8Bound) Dequantize(dst []float32, read TensorReader) (string, error) {
	data, _, err := read(b.m.Name + suffixWeight)
	if err != nil {
		return "", err
	}
	sb, _, err := read(b.scaleName())
	if err != nil {
		return "", err
	}
	scale := make([]float32, len(sb)/4)
	if err := safetensors.DecodeFloat32(scale, sb, safetensors.F32); err != nil {
		return "", err
	}
	if err := quantize.DequantizeFP8Block(dst, data, scale, b.m.Rows, b.m.Cols); err != nil {
		return fmt.Sprintf("tensor %q: %v", b.m.Name+suffixWeight, err), nil
	}
	return "", nil
}

func (b *fp8Bound) newEncoder() encoder { return &fp8Encoder{} }

// fp8Encoder quantizes a slab band by band (blocks are independent) and measures each band while
// it is in cache; the slab's codes and scales are written at its end.
type fp8Encoder struct {
	j      *job
	res    quantize.FP8Result // storage reused slab after slab
	bands  quantize.FP8Bands
	meas   quantize.Measure
	scales []byte // the scales as bytes
}

func (e *fp8Encoder) begin(_ context.Context, j *job) error {
	e.j, e.meas = j, quantize.Measure{}
	opt := quantize.FP8Options{Workers: 1, Backend: j.wk.backend, FirstRow: j.s.r0}
	if err := e.bands.Begin(&e.res, j.rows(), j.m.Cols, opt); err != nil {
		return fmt.Errorf("convert: %s: %w", j.m.describe(), err)
	}
	return nil
}

func (e *fp8Encoder) add(ctx context.Context, band *slab, vals []float32) error {
	q, err := e.bands.Add(ctx, vals, band.r1-band.r0)
	if err == nil && !e.j.wk.null {
		err = e.meas.AddFP8Block(vals, q)
	}
	if err != nil {
		return fmt.Errorf("convert: %s: %w", e.j.m.describe(), err)
	}
	return nil
}

func (e *fp8Encoder) end(context.Context) error {
	j := e.j
	m, s, q := j.m, j.s, &e.res
	if err := j.set.write(m.Name+suffixWeight, int64(s.r0)*int64(m.Cols), q.Data); err != nil {
		return err
	}
	e.scales = grow(e.scales, 4*len(q.ScaleInv))
	for i, v := range q.ScaleInv {
		binary.LittleEndian.PutUint32(e.scales[4*i:], math.Float32bits(v))
	}
	sc := ceilDiv(int64(m.Cols), FP8BlockSize)
	if err := j.set.write(j.b.(*fp8Bound).scaleName(), int64(s.r0/FP8BlockSize)*sc*4, e.scales); err != nil {
		return err
	}
	if !j.wk.null {
		e.meas.MergeInto(&j.out.met, j.base())
	}
	return nil
}
