package convert

import (
	"context"
	"fmt"
	"sync"

	"pdq/quantize"
	"pdq/safetensors"
)

// An Encoding is what one scheme means, in one place: the tensors it writes for a module, the
// config.json group it belongs to, how it encodes a slab of values (streamed band by band, the
// error of the written bytes measured on the way), how verify reads the values back, what it
// costs the planner and what it stores. Every scheme is one entry of encodings; the pipeline,
// the planner, verify and the partition ask the entry, never the scheme's name. docs/ARCHITECTURE.md
// walks through adding one.
type Encoding interface {
	// Scheme is the encoding's name in plans and reports.
	Scheme() Scheme
	// Bind fixes the encoding to module m in output kind under the plan's options, the way
	// compress/flate binds a level: everything asked afterwards is asked of the Bound.
	Bind(m *Module, kind OutputKind, o *Options) Bound
}

// Bound is an Encoding bound to one module and one output.
type Bound interface {
	// Scheme is the bound encoding's name.
	Scheme() Scheme
	// Specs lists the tensors it writes, in plan order.
	Specs() []safetensors.TensorSpec
	// ValueTensor is the tensor whose reconstruction error the report row measures; "" when the
	// output has no row for the module (its bytes are the source's).
	ValueTensor() string
	// Copied lists, beside Specs, the source tensor each output tensor is a byte copy of; nil
	// when the output holds encoded values (measured instead).
	Copied() []string
	// Values reports whether the encoder needs the module's decoded float32 values.
	Values() bool
	// ChecksFinite reports whether the encoder refuses NaN and ±Inf in its input itself (naming
	// the element), so that the separate pass over the values can be skipped.
	ChecksFinite() bool
	// Bands reports whether the encoder takes a slab in bands of whole FP8 block rows; otherwise
	// each slab is one band.
	Bands() bool
	// Cost estimates the CPU seconds of encoding the module (the partition balances these).
	Cost() float64
	// Dequantize reads the output's tensors (read) and writes the values they hold to dst
	// (Rows×Cols), for verify. A malformed output is a problem, not an error.
	Dequantize(dst []float32, read TensorReader) (problem string, err error)

	// newEncoder returns a streaming encoder of this scheme; a worker keeps one per output and
	// scheme, its storage reused slab after slab.
	newEncoder() encoder
}

// TensorReader reads one whole tensor of an output: its bytes and its header entry.
type TensorReader func(name string) ([]byte, *safetensors.Tensor, error)

// encoder encodes slabs of one scheme: begin, add for each band in row order (a slab not cut in
// bands is one band), end. It writes the output's tensors to the job's shard set and adds the
// error of the written bytes to the job's figures.
type encoder interface {
	begin(ctx context.Context, j *job) error
	add(ctx context.Context, band *slab, vals []float32) error
	end(ctx context.Context) error
}

// job is one slab of one module going to one output.
type job struct {
	b   Bound
	m   *Module
	set *shardSet
	s   *slab
	wk  *worker
	out *outResult // the slab's figures for this output
	enc encoder
}

// base is the index in its tensor of the slab's first value.
func (j *job) base() int64 { return int64(j.s.r0) * int64(j.m.Cols) }

// rows is the number of rows of the slab.
func (j *job) rows() int { return j.s.r1 - j.s.r0 }

// outResult holds what one output of a slab measured.
type outResult struct {
	met quantize.Metrics
	rtn quantize.Metrics // what the reference rule would have given (INT4)
	// With calibration statistics: Σd·w², Σd·(w−ŵ)² (d = E[x²]), the method used and why it
	// differs from the plan's.
	wRef, wErr float64
	method     string
	note       string
}

// fitter is implemented by the encodings that cannot take every module.
type fitter interface {
	// unfit says why module m cannot take the encoding under options o ("" when it can).
	unfit(m *Module, o *Options) string
}

// refuser is implemented by the encodings whose refusals have a sentinel of their own (wrapping
// ErrUnsupported).
type refuser interface {
	refusal() error
}

// refusal is the sentinel a refusal of scheme s wraps: the encoding's own, or ErrUnsupported.
func refusal(s Scheme) error {
	if r, ok := encodings[s].(refuser); ok {
		return r.refusal()
	}
	return ErrUnsupported
}

// unfit says why module m cannot take scheme s under options o ("" when it can).
func unfit(m *Module, s Scheme, o *Options) string {
	if f, ok := encodings[s].(fitter); ok {
		return f.unfit(m, o)
	}
	return ""
}

// encodings is the table of every scheme pdq writes.
var encodings = map[Scheme]Encoding{}

// register adds an encoding to the table; a scheme registered twice is a programming error.
func register(e Encoding) {
	if _, dup := encodings[e.Scheme()]; dup {
		panic("convert: encoding " + string(e.Scheme()) + " registered twice")
	}
	encodings[e.Scheme()] = e
}

// bind returns module m's encoding in output kind, bound under options o.
func bind(m *Module, kind OutputKind, o *Options) Bound {
	s := m.Scheme(kind)
	e, ok := encodings[s]
	if !ok {
		panic(fmt.Sprintf("convert: internal: module %s: scheme %q has no encoding", m.Name, s))
	}
	return e.Bind(m, kind, o)
}

// bound returns module m's encoding in output kind: the one bound when the plan was made, or a
// fresh binding for a module made by hand.
func (p *Plan) bound(m *Module, kind OutputKind) Bound {
	i := outputIndex(kind)
	if i < len(m.bound) && m.bound[i] != nil {
		return m.bound[i]
	}
	return bind(m, kind, &p.Options)
}

// bindAll binds every module's encodings, once its schemes and calibration are final.
func (p *Plan) bindAll() {
	for _, m := range p.Modules {
		m.bound = make([]Bound, len(outputKinds))
		for i, kind := range outputKinds {
			m.bound[i] = bind(m, kind, &p.Options)
		}
	}
}

// groupReader is implemented by the decode formats whose config group in an output's
// config.json says more than INT4's (verify rebuilds the options from it).
type groupReader interface {
	// readGroup reports whether config group g is the encoding's, and sets what it says in o.
	readGroup(g map[string]any, o *Options) bool
}

// readGroup lets the encodings recognise config group g of an output, setting o.
func readGroup(g map[string]any, o *Options) {
	for _, f := range DecodeFormats {
		if r, ok := encodings[(&Options{DecodeFormat: f}).targetScheme()].(groupReader); ok && r.readGroup(g, o) {
			return
		}
	}
}

// isDecodeFormat reports whether format, the top-level format of a compressed-tensors
// quantization_config, is one a decode output of pdq has: a decode format's or mixed-precision.
func isDecodeFormat(format string) bool {
	if format == "mixed-precision" {
		return true
	}
	for _, f := range DecodeFormats {
		if g, ok := encodings[(&Options{DecodeFormat: f}).targetScheme()].(ctGrouped); ok {
			if _, name, _ := g.ctGroup(&Options{DecodeFormat: f}); name == format {
				return true
			}
		}
	}
	return false
}

// runState is what the encodings share across the modules of one run (the scale an expert's
// gate and up projections share, say): one value per key, made on first use.
type runState struct {
	mu sync.Mutex
	m  map[string]any
}

// get returns the run's value under key, made by mk the first time.
func (s *runState) get(key string, mk func() any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]any{}
	}
	v, ok := s.m[key]
	if !ok {
		v = mk()
		s.m[key] = v
	}
	return v
}
