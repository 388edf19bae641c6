package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"pdq/calib"
	"pdq/quantize"
	"pdq/quantize/engines"
	"pdq/quantize/report"
	"pdq/safetensors"
)

// int4Encoding is compressed-tensors pack-quantized INT4 (docs/FORMATS.md, "Decode checkpoint"):
// symmetric levels -8..7 with one BF16 scale per group of Options.GroupSize input features (or per
// output channel), chosen by Options.Method, or with calibration statistics by the weighted
// search or GPTQ.
type int4Encoding struct{}

func init() {
	register(int4Encoding{})
	registerFormat(FormatInfo{
		Format: DecodeInt4, Title: "INT4", Scheme: SchemeInt4,
		Layout:  "pack-quantized INT4, BF16 scale per --group-size (32 default, 64, 128 or per channel)",
		GPUs:    "vLLM and SGLang on Hopper and Blackwell",
		Engine:  engines.FormatInt4,
		Report:  report.Info(SchemeInt4),
		Tensors: int4Tensors,
		widthRule: func(o *Options) (string, int) {
			if o.GroupSize == PerChannel {
				return "", 0
			}
			return fmt.Sprintf("decode INT4 g%d", o.GroupSize), max(64, o.GroupSize)
		},
	}, 0)
}

// int4Tensors are the pack-quantized tensors of a rows×cols weight with groups of group
// columns: the levels eight per I32, a BF16 scale per group, the I64 shape.
func int4Tensors(rows, cols, group int64) []TensorShape {
	return []TensorShape{
		{suffixPacked[1:], safetensors.I32, []int64{rows, cols / 8}},
		{suffixScale[1:], safetensors.BF16, []int64{rows, cols / max(group, 1)}},
		{suffixWeightShape[1:], safetensors.I64, []int64{2}},
	}
}

func (int4Encoding) Scheme() Scheme { return SchemeInt4 }

func (int4Encoding) Bind(m *Module, kind OutputKind, o *Options) Bound {
	return &int4Bound{scheme: SchemeInt4, m: m, kind: kind, o: o, group: o.group(m.Cols)}
}

// unfit: the in features must fill whole groups and whole packed words.
func (int4Encoding) unfit(m *Module, o *Options) string {
	g := o.group(m.Cols)
	switch {
	case m.Cols == 0:
		return "no in features"
	case m.Cols%g != 0:
		return fmt.Sprintf("in features %d not a multiple of group size %d", m.Cols, g)
	case m.Cols%8 != 0:
		return fmt.Sprintf("in features %d not a multiple of 8 (packing)", m.Cols)
	}
	return ""
}

// ctGroup is the compressed-tensors config group of the INT4 modules.
func (int4Encoding) ctGroup(o *Options) (key, format string, group map[string]any) {
	w := map[string]any{
		"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": o.GroupSize,
		"dynamic": false, "actorder": nil, "observer": "minmax", "observer_kwargs": map[string]any{},
		"block_structure": nil,
	}
	if o.GroupSize == PerChannel {
		w["strategy"], w["group_size"] = "channel", nil
	}
	return "int4", "pack-quantized", map[string]any{
		"format": "pack-quantized", "weights": w, "input_activations": nil, "output_activations": nil,
	}
}

// int4Bound is INT4 bound to one module (or another format storing INT4's tensors).
type int4Bound struct {
	scheme Scheme // SchemeInt4 or the other format's
	m      *Module
	kind   OutputKind
	o      *Options
	group  int // the group width in columns (Cols per channel)
	// weights, when set, is how the format's kernels read the bytes back (measured and
	// verified on those weights).
	weights *quantize.EngineWeights
}

func (b *int4Bound) Scheme() Scheme { return b.scheme }

func (b *int4Bound) Specs() []safetensors.TensorSpec {
	n, k := int64(b.m.Rows), int64(b.m.Cols)
	return []safetensors.TensorSpec{
		{Name: b.m.Name + suffixPacked, DType: safetensors.I32, Shape: []int64{n, k / 8}},
		{Name: b.m.Name + suffixScale, DType: safetensors.BF16, Shape: []int64{n, k / int64(max(b.group, 1))}},
		{Name: b.m.Name + suffixWeightShape, DType: safetensors.I64, Shape: []int64{2}},
	}
}

func (b *int4Bound) ValueTensor() string {
	if b.kind != KindDecode {
		return ""
	}
	return b.m.Name + suffixPacked
}

func (b *int4Bound) Copied() []string { return nil }
func (b *int4Bound) Values() bool     { return true }

// calibrated reports whether the module uses calibration statistics (the weighted search or GPTQ).
func (b *int4Bound) calibrated() bool { return b.m.Calib != nil && b.m.Calib.Method != CalibNone }

// ChecksFinite: the plain search finds NaN and ±Inf through each group's absolute maximum.
func (b *int4Bound) ChecksFinite() bool { return !b.calibrated() }

// Bands: the calibrated searches take whole slabs.
func (b *int4Bound) Bands() bool { return !b.calibrated() }

func (b *int4Bound) Cost() float64 {
	var ns float64
	switch {
	case b.m.Calib != nil && b.m.Calib.Method == CalibGPTQ:
		ns = nsGPTQPerCol * float64(b.m.Cols)
	case b.m.Calib != nil:
		ns = nsInt4Weighted
	case b.o.Method == quantize.MethodRTN:
		ns = nsInt4RTN
	default:
		ns = nsInt4MSE
	}
	return float64(b.m.values()) * ns * 1e-9
}

func (b *int4Bound) Dequantize(dst []float32, read TensorReader) (string, error) {
	m := b.m
	packed, _, err := read(m.Name + suffixPacked)
	if err != nil {
		return "", err
	}
	scales, st, err := read(m.Name + suffixScale)
	if err != nil {
		return "", err
	}
	if len(st.Shape) != 2 || st.Shape[1] <= 0 {
		return fmt.Sprintf("tensor %q: shape %v, want [N, K/group]", st.Name, st.Shape), nil
	}
	g := m.Cols / int(st.Shape[1])
	deq := func() error { return quantize.DequantizeInt4(dst, packed, scales, st.DType, m.Rows, m.Cols, g) }
	if w := b.weights; w != nil { // the weights the format's kernels compute with, as the report measured
		if st.DType != safetensors.BF16 || g != w.Group {
			return fmt.Sprintf("tensor %q: %s scales in groups of %d, want BF16 in groups of %d", st.Name, st.DType, g, w.Group), nil
		}
		deq = func() error { return w.Dequantize(dst, packed, scales, m.Rows, m.Cols) }
	}
	if err := deq(); err != nil {
		return fmt.Sprintf("tensor %q: %v", m.Name+suffixPacked, err), nil
	}
	shape, sh, err := read(m.Name + suffixWeightShape)
	if err != nil {
		return "", err
	}
	return checkShape(shape, sh.DType, m), nil
}

// annotate adds to an INT4 report row what the reference rule would have given, the group size,
// the method and the calibration.
func (b *int4Bound) annotate(rec *record, outs []outResult) {
	var rtnTotal quantize.Metrics
	for i := range outs {
		rtnTotal.Merge(outs[i].rtn)
	}
	v := report.Float(rtnTotal.SQNR())
	rec.Row.RTNSQNR, rec.RTN = &v, &rtnTotal
	rec.Row.GroupSize, rec.Row.Method = b.o.GroupSize, string(b.o.Method)
	setCalib(&rec.Row, b.m.Calib, outs)
}

// checkShape checks the weight_shape tensor of an INT4 module: [N, K] as I64 (or I32).
func checkShape(b []byte, dt safetensors.DType, m *Module) string {
	var n, k int64
	switch {
	case dt == safetensors.I64 && len(b) >= 16:
		n, k = int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
	case dt == safetensors.I32 && len(b) >= 8:
		n, k = int64(int32(binary.LittleEndian.Uint32(b))), int64(int32(binary.LittleEndian.Uint32(b[4:])))
	default:
		return fmt.Sprintf("tensor %q: dtype %s, want I64", m.Name+suffixWeightShape, dt)
	}
	if n != int64(m.Rows) || k != int64(m.Cols) {
		return fmt.Sprintf("tensor %q holds [%d, %d], want [%d, %d]", m.Name+suffixWeightShape, n, k, m.Rows, m.Cols)
	}
	return ""
}

// options returns the quantizer's options for slab s on the worker's backend.
func (b *int4Bound) options(wk *worker, s *slab) quantize.Int4Options {
	return quantize.Int4Options{GroupSize: b.o.GroupSize, Method: b.o.Method, SignedScales: b.o.SignedScales, Workers: 1,
		Backend: wk.backend, FirstRow: s.r0, Weights: b.weights}
}

func (b *int4Bound) newEncoder() encoder { return &int4Encoder{} }

// int4Encoder streams a slab through the plain search (Int4Bands: each band quantized and
// measured while in cache), or hands the whole slab to the calibrated search.
type int4Encoder struct {
	j     *job
	b     *int4Bound
	res   quantize.Int4Result // storage reused slab after slab
	bands quantize.Int4Bands
}

func (e *int4Encoder) begin(_ context.Context, j *job) error {
	e.j, e.b = j, j.b.(*int4Bound)
	if e.b.calibrated() || j.wk.null {
		return nil
	}
	if err := e.bands.Begin(&e.res, j.rows(), j.m.Cols, e.b.options(j.wk, j.s)); err != nil {
		return fmt.Errorf("convert: %s: %w", j.m.describe(), err)
	}
	return nil
}

func (e *int4Encoder) add(ctx context.Context, band *slab, vals []float32) error {
	j := e.j
	switch {
	case j.wk.null:
		return quantize.QuantizeInt4Into(ctx, &e.res, vals, band.r1-band.r0, j.m.Cols, e.b.options(j.wk, band))
	case e.b.calibrated():
		return e.calibrated(ctx, vals)
	}
	if err := e.bands.Add(ctx, vals, band.r1-band.r0); err != nil {
		return fmt.Errorf("convert: %s: %w", j.m.describe(), err)
	}
	return nil
}

func (e *int4Encoder) end(context.Context) error {
	j := e.j
	if e.b.calibrated() {
		return nil // written by add: the slab was one band
	}
	if !j.wk.null {
		if err := e.bands.End(&j.out.met, j.base()); err != nil {
			return fmt.Errorf("convert: %s: %w", j.m.describe(), err)
		}
	}
	if err := e.write(&e.res); err != nil || j.wk.null {
		return err
	}
	j.out.met.Clipped += e.res.Clipped
	j.out.rtn = rtnMetrics(&e.res)
	return nil
}

// calibrated quantizes the whole slab (vals) with the module's statistics, writes it and
// measures it, the activation-weighted error too.
func (e *int4Encoder) calibrated(ctx context.Context, vals []float32) error {
	j := e.j
	m, rows := j.m, j.rows()
	q, d, err := e.quantizeCalibrated(ctx, vals)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", m.describe(), err)
	}
	if err := e.write(q); err != nil || j.wk.null {
		return err
	}
	met := &j.out.met
	if err := met.AddInt4(vals, q, j.base()); err != nil {
		return err
	}
	met.Clipped += q.Clipped
	wk := j.wk
	wk.deq = grow(wk.deq, len(vals))
	deq := wk.deq[:len(vals)]
	if err := quantize.DequantizeInt4On(wk.backend, deq, q.Packed, q.Scales, safetensors.BF16, rows, m.Cols, e.b.group); err != nil {
		return err
	}
	j.out.wRef, j.out.wErr = quantize.WeightedSums(vals, deq, d)
	j.out.rtn = rtnMetrics(q)
	return nil
}

// quantizeCalibrated runs the weighted search or GPTQ on the slab and returns the column
// weights d it used. A Hessian that cannot be factorized even with more dampening makes the
// module fall back to the weighted search, noted in the report.
func (e *int4Encoder) quantizeCalibrated(ctx context.Context, vals []float32) (*quantize.Int4Result, []float32, error) {
	j := e.j
	m, wk, res := j.m, j.wk, j.out
	mc := m.Calib
	opt := e.b.options(wk, j.s)
	st := e.b.o.Calib
	d, err := st.SqMean(mc.Entry)
	if err != nil {
		return nil, nil, err
	}
	res.method = mc.Method
	if mc.Method == CalibGPTQ {
		f, err := wk.factor(ctx, st, mc.Entry)
		defer wk.r.factors.done(mc.Entry)
		if err == nil {
			q, err := calib.QuantizeGPTQ(ctx, vals, j.rows(), m.Cols, opt, d, f)
			if err == nil && f.Tries > 1 {
				res.note = fmt.Sprintf("Cholesky failed %d time(s); dampening raised to %g", f.Tries-1, f.Damp)
			}
			return q, d, err
		}
		if !errors.Is(err, calib.ErrIllConditioned) && !errors.Is(err, calib.ErrNoSignal) {
			return nil, nil, err
		}
		res.method, res.note = CalibWeighted, "gptq failed, weighted search used: "+err.Error()
	}
	q, err := quantize.QuantizeInt4Weighted(ctx, vals, j.rows(), m.Cols, opt, d)
	return q, d, err
}

// write writes the slab's INT4 tensors (and the shape tensor, with the first slab).
func (e *int4Encoder) write(q *quantize.Int4Result) error {
	j := e.j
	m, s, set := j.m, j.s, j.set
	if err := set.write(m.Name+suffixPacked, int64(s.r0)*int64(m.Cols/8)*4, q.Packed); err != nil {
		return err
	}
	if err := set.write(m.Name+suffixScale, int64(s.r0)*int64(m.Cols/e.b.group)*2, q.Scales); err != nil {
		return err
	}
	if s.r0 != 0 {
		return nil
	}
	shape := make([]byte, 16)
	binary.LittleEndian.PutUint64(shape, uint64(m.Rows))
	binary.LittleEndian.PutUint64(shape[8:], uint64(m.Cols))
	return set.write(m.Name+suffixWeightShape, 0, shape)
}

// rtnMetrics is what the compressed-tensors rule would have given on a slab, from the kernel's
// per-group sums: no second quantization pass.
func rtnMetrics(q *quantize.Int4Result) quantize.Metrics {
	return quantize.Metrics{N: int64(q.Rows) * int64(q.Cols), SumSqRef: q.SumSq, SumSqErr: q.RTNSumSqErr}
}

// factor returns the GPTQ factor of a module's statistics entry, computed once for all the
// modules sharing the entry (gate and up of one expert) and dropped after the last of them. A
// bad Hessian (calib.ErrFormat) is an error of the run; ErrIllConditioned and ErrNoSignal lead
// to the weighted fallback.
func (wk *worker) factor(ctx context.Context, st *calib.Stats, e *calib.Entry) (*calib.Factor, error) {
	return wk.r.factors.get(e, func() (*calib.Factor, error) {
		h, err := st.Hessian(e)
		if err != nil {
			return nil, err
		}
		return calib.Factorize(ctx, h, e.K, wk.gptqOptions())
	})
}
