package convert

import (
	"context"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/safetensors"
)

// The pass-through encodings: the source's bytes as they are (copy), an FP8 source's blocks kept
// under compressed-tensors names (fp8-keep), and BF16 values (bf16).

// copyEncoding writes the source tensor (and its scale companion) unchanged.
type copyEncoding struct{}

// fp8KeepEncoding writes an FP8 source's codes and block scales unchanged, renamed
// NAME.weight and NAME.weight_scale.
type fp8KeepEncoding struct{}

// bf16Encoding writes BF16 values: a BF16 source's bytes, or any other source's values
// rounded to BF16.
type bf16Encoding struct{}

func init() {
	register(copyEncoding{})
	register(fp8KeepEncoding{})
	register(bf16Encoding{})
}

func (copyEncoding) Scheme() Scheme    { return SchemeCopy }
func (fp8KeepEncoding) Scheme() Scheme { return SchemeFP8Keep }
func (bf16Encoding) Scheme() Scheme    { return SchemeBF16 }

// ctGroup: kept FP8 blocks belong to the FP8 block group.
func (fp8KeepEncoding) ctGroup(*Options) (key, format string, group map[string]any) {
	return fp8CTGroup()
}

func (copyEncoding) Bind(m *Module, _ OutputKind, _ *Options) Bound {
	b := &rawBound{m: m, scheme: SchemeCopy, weight: m.Weight.Name}
	if m.Scale != nil {
		b.scale = m.Scale.Name
	}
	return b
}

func (fp8KeepEncoding) Bind(m *Module, _ OutputKind, _ *Options) Bound {
	return &rawBound{m: m, scheme: SchemeFP8Keep, weight: m.Name + suffixWeight, scale: m.Name + suffixScale}
}

// rawBound is a pass-through bound to one module: its weight's bytes written as tensor weight,
// its scale companion's (when any) as tensor scale.
type rawBound struct {
	m             *Module
	scheme        Scheme
	weight, scale string
}

func (b *rawBound) Scheme() Scheme { return b.scheme }

func (b *rawBound) Specs() []safetensors.TensorSpec {
	w := b.m.Weight
	specs := []safetensors.TensorSpec{{Name: b.weight, DType: w.DType, Shape: w.Shape}}
	if b.m.Scale != nil && b.scale != "" {
		specs = append(specs, safetensors.TensorSpec{Name: b.scale, DType: b.m.Scale.DType, Shape: b.m.Scale.Shape})
	}
	return specs
}

func (b *rawBound) Copied() []string {
	c := []string{b.m.Weight.Name}
	if b.m.Scale != nil && b.scale != "" {
		c = append(c, b.m.Scale.Name)
	}
	return c
}

func (b *rawBound) ValueTensor() string { return "" }
func (b *rawBound) Values() bool        { return false }
func (b *rawBound) ChecksFinite() bool  { return false }
func (b *rawBound) Bands() bool         { return true }
func (b *rawBound) Cost() float64       { return float64(b.m.Weight.ByteSize()) * nsCopyByte * 1e-9 }

func (b *rawBound) Dequantize([]float32, TensorReader) (string, error) { return "", nil }

func (b *rawBound) newEncoder() encoder { return &rawEncoder{} }

// rawEncoder writes the slab's source bytes as they were read.
type rawEncoder struct{}

func (rawEncoder) begin(_ context.Context, j *job) error {
	b := j.b.(*rawBound)
	m, s := j.m, j.s
	_, rowBytes := rowsOf(m)
	if err := j.set.write(b.weight, int64(s.r0)*rowBytes, s.raw); err != nil {
		return err
	}
	if m.Scale == nil || b.scale == "" || len(s.scaleRaw) == 0 {
		return nil // no scale, or a later slab of the same scale block row: written once by the first
	}
	sr0, _ := scaleRange(m, s.r0, s.r1)
	srow := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
	return j.set.write(b.scale, sr0*srow, s.scaleRaw)
}

func (rawEncoder) add(context.Context, *slab, []float32) error { return nil }
func (rawEncoder) end(context.Context) error                   { return nil }

func (bf16Encoding) Bind(m *Module, kind OutputKind, _ *Options) Bound {
	return &bf16Bound{m: m, kind: kind}
}

// bf16Bound is BF16 bound to one module and output.
type bf16Bound struct {
	m    *Module
	kind OutputKind
}

func (b *bf16Bound) Scheme() Scheme { return SchemeBF16 }

func (b *bf16Bound) Specs() []safetensors.TensorSpec {
	shape := b.m.Weight.Shape
	if b.m.Packed != nil {
		shape = []int64{int64(b.m.Rows), int64(b.m.Cols)}
	}
	return []safetensors.TensorSpec{{Name: b.m.Name + suffixWeight, DType: safetensors.BF16, Shape: shape}}
}

// ValueTensor: BF16 rows are the decode output's; an already-quantized module kept out of FP8
// has one in the prefill output too (its values are decoded, so the rounding is measured).
func (b *bf16Bound) ValueTensor() string {
	if b.kind != KindDecode && b.m.Packed == nil {
		return ""
	}
	return b.m.Name + suffixWeight
}

func (b *bf16Bound) Copied() []string   { return nil }
func (b *bf16Bound) Values() bool       { return true }
func (b *bf16Bound) ChecksFinite() bool { return false }
func (b *bf16Bound) Bands() bool        { return true }
func (b *bf16Bound) Cost() float64      { return float64(b.m.values()) * nsDense * 1e-9 }

func (b *bf16Bound) Dequantize(dst []float32, read TensorReader) (string, error) {
	raw, _, err := read(b.m.Name + suffixWeight)
	if err != nil {
		return "", err
	}
	kernels.DecodeBF16(dst, raw)
	return "", nil
}

func (b *bf16Bound) newEncoder() encoder { return &bf16Encoder{} }

// bf16Encoder rounds each band to BF16 (or, for a BF16 source, keeps its bytes) and measures it.
type bf16Encoder struct {
	j    *job
	pass bool   // the source's bytes are the output
	out  []byte // the slab's encoded values, reused
	deq  []float32
	meas quantize.Measure
}

func (e *bf16Encoder) begin(_ context.Context, j *job) error {
	e.j, e.meas = j, quantize.Measure{}
	e.pass = bf16Passthrough(j.m, j.s) && !j.wk.null
	if !e.pass {
		e.out = grow(e.out, 2*j.rows()*j.m.Cols)
	}
	return nil
}

func (e *bf16Encoder) add(_ context.Context, band *slab, vals []float32) error {
	if e.j.wk.null {
		return nil
	}
	if e.pass { // a BF16 source's finite values (checked) come back bit for bit from float32
		e.meas.Add(vals, vals)
		return nil
	}
	lo := 2 * (band.r0 - e.j.s.r0) * e.j.m.Cols
	enc := e.out[lo : lo+2*len(vals)]
	kernels.EncodeBF16(enc, vals)
	e.deq = grow(e.deq, len(vals))
	kernels.DecodeBF16(e.deq, enc)
	e.meas.Add(vals, e.deq)
	return nil
}

func (e *bf16Encoder) end(context.Context) error {
	j := e.j
	out := e.out
	if e.pass {
		out = j.s.raw
	}
	if err := j.set.write(j.m.Name+suffixWeight, j.base()*2, out); err != nil {
		return err
	}
	if !j.wk.null {
		e.meas.MergeInto(&j.out.met, j.base())
	}
	return nil
}

// bf16Passthrough reports whether slab s of a BF16 output is its source's bytes: a BF16 source's
// finite values (checked) come back bit for bit from a round trip through float32.
func bf16Passthrough(m *Module, s *slab) bool {
	return m.Weight.DType == safetensors.BF16 && m.Scale == nil && int64(len(s.raw)) == int64(s.r1-s.r0)*int64(m.Cols)*2
}
