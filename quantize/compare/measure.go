package compare

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"

	"pdq/internal/par"
	"pdq/quantize"
	"pdq/quantize/convert"
)

// Options choose what a comparison measures.
type Options struct {
	// Formats are measured in this order (ParseFormats); none means DefaultFormats.
	Formats []Format
	// Method is the scale search of every format: quantize.MethodMSE (also when empty) or
	// quantize.MethodRTN, compressed-tensors' rule.
	Method quantize.Method
	// Layers, when not nil, keeps the modules of these layers only.
	Layers map[int]bool
	// Sample, when positive, measures that many routed experts per layer, spread evenly over
	// the expert indices (expert i·E/Sample for i < Sample, E the experts of the layer).
	Sample int
	// Workers bounds the modules measured at once; <= 0 means GOMAXPROCS. Results do not
	// depend on it.
	Workers int
	// Progress, when set, is called with the source bytes measured after each slab (from any
	// goroutine).
	Progress func(done, total int64, module string)
}

// Module is one measured module.
type Module struct {
	Name       string
	Layer      int    // -1 when not in a layer
	Expert     int    // -1 when not a routed expert
	Projection string // a routed expert's projection (gate_proj, up_proj, down_proj, w1, ...); role:name for the rest
	Rows, Cols int
	// Metrics holds the error of each format's bytes (indexed like Result.Formats), its slabs'
	// figures merged in order as a conversion's report merges them.
	Metrics []quantize.Metrics
	// Global is the scale the module shares with its expert's gate or up projection in the
	// first measured format that has one (convert.CompareInfo.Shared), 0 without such a format.
	Global float32
}

// Result is what a comparison measured.
type Result struct {
	Formats []Format
	Method  quantize.Method
	// Modules are the measured modules, in the source's order.
	Modules []Module
	// Targets are the plan's target modules (every layer and expert): Modules is a sample of them.
	Targets int
	// SourceBytes is the weight bytes of the measured modules in the source.
	SourceBytes int64
}

var (
	reLayer  = regexp.MustCompile(`\.layers\.(\d+)\.`)
	reExpert = regexp.MustCompile(`\.experts\.(\d+)\.(\w+)$`)
	reProj   = regexp.MustCompile(`\.(\w+)$`)
)

// Targets returns the plan's decode targets: the modules the decode checkpoint quantizes.
func Targets(p *convert.Plan) []*convert.Module {
	var out []*convert.Module
	for _, m := range p.Modules {
		if m.Linear && m.Scheme(convert.KindDecode) == p.TargetScheme() {
			out = append(out, m)
		}
	}
	return out
}

// Run measures every format on the plan's decode targets (those Options select), reading the
// source once (twice the gate and up projections when a format with a shared scale is measured:
// it comes from the largest value of both), a slab at a time: memory is one slab per worker.
func Run(ctx context.Context, p *convert.Plan, o Options) (*Result, error) {
	if len(o.Formats) == 0 {
		o.Formats, _ = ParseFormats(DefaultFormats)
	}
	if o.Method == "" {
		o.Method = quantize.MethodMSE
	}
	if err := o.Method.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if o.Sample < 0 {
		return nil, fmt.Errorf("%w: sample of %d experts per layer", ErrOptions, o.Sample)
	}
	targets := Targets(p)
	for _, m := range targets {
		for _, f := range o.Formats {
			if why := f.Unfit(m.Rows, m.Cols); why != "" {
				return nil, fmt.Errorf("%w: %s: module %q: %s", ErrUnfit, f.Name, m.Name, why)
			}
		}
	}
	res := &Result{Formats: o.Formats, Method: o.Method, Targets: len(targets)}
	var src []*convert.Module
	for _, m := range selectModules(targets, o) {
		res.Modules = append(res.Modules, describe(m, len(o.Formats)))
		src = append(src, m)
		res.SourceBytes += m.Weight.ByteSize()
	}
	if len(src) == 0 {
		return nil, fmt.Errorf("%w: %d targets, none in the layers and experts chosen", ErrNoModules, len(targets))
	}
	units := pairUnits(res.Modules)
	var done atomic.Int64
	// One unit state per goroutine at a time, reused: its reader's and its slab's buffers.
	free := make(chan *unit, max(len(units), 1))
	err := par.ForEach(ctx, len(units), o.Workers, func(i int) error {
		var u *unit
		select {
		case u = <-free:
		default:
			u = &unit{r: p.NewSourceReader(), o: &o, mods: src, res: res, done: &done}
		}
		defer func() { free <- u }()
		return u.run(ctx, units[i])
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// describe names module m's place in the model.
func describe(m *convert.Module, formats int) Module {
	d := Module{Name: m.Name, Layer: -1, Expert: -1, Rows: m.Rows, Cols: m.Cols, Metrics: make([]quantize.Metrics, formats)}
	if sm := reLayer.FindStringSubmatch(m.Name); sm != nil {
		d.Layer, _ = strconv.Atoi(sm[1])
	}
	if sm := reExpert.FindStringSubmatch(m.Name); sm != nil {
		d.Expert, _ = strconv.Atoi(sm[1])
		d.Projection = sm[2]
	} else if sm := reProj.FindStringSubmatch(m.Name); sm != nil {
		// Outside the routed experts the role names the group too: a shared expert's gate_proj
		// is not a routed one's.
		d.Projection = string(m.Role) + ":" + sm[1]
	}
	return d
}

// selectModules keeps the targets of the chosen layers and, with a sample, the chosen experts
// of each layer.
func selectModules(targets []*convert.Module, o Options) []*convert.Module {
	experts := map[int][]int{} // layer -> its expert indices, sorted
	for _, m := range targets {
		d := describe(m, 0)
		if d.Expert >= 0 && !slices.Contains(experts[d.Layer], d.Expert) {
			experts[d.Layer] = append(experts[d.Layer], d.Expert)
		}
	}
	chosen := map[int]map[int]bool{}
	for l, es := range experts {
		slices.Sort(es)
		chosen[l] = map[int]bool{}
		n := len(es)
		if o.Sample > 0 && o.Sample < n {
			n = o.Sample
		}
		for i := range n {
			chosen[l][es[i*len(es)/n]] = true
		}
	}
	var out []*convert.Module
	for _, m := range targets {
		d := describe(m, 0)
		if o.Layers != nil && !o.Layers[d.Layer] {
			continue
		}
		if d.Expert >= 0 && !chosen[d.Layer][d.Expert] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// pairUnits groups the modules into units of work: an expert's gate and up projections (w1
// and w3) together, as they share the global scale of the formats that have one (the engines'
// fused w13 GEMM needs it);
// every other module alone. Units keep the modules' order.
func pairUnits(mods []Module) [][]int {
	var units [][]int
	open := map[string]int{} // parent -> its unit, for gate and up
	for i, m := range mods {
		if m.Expert < 0 || !isGateUp(m.Projection) {
			units = append(units, []int{i})
			continue
		}
		parent := m.Name[:len(m.Name)-len(m.Projection)]
		if u, ok := open[parent]; ok {
			units[u] = append(units[u], i)
			continue
		}
		open[parent] = len(units)
		units = append(units, []int{i})
	}
	return units
}

func isGateUp(proj string) bool {
	switch proj {
	case "gate_proj", "up_proj", "w1", "w3":
		return true
	}
	return false
}

// unit measures units of work, one at a time, on one goroutine.
type unit struct {
	r    *convert.SourceReader
	o    *Options
	mods []*convert.Module
	res  *Result
	done *atomic.Int64
	vals []float32
	i4   quantize.Int4Result
}

func (u *unit) run(ctx context.Context, idx []int) error {
	shared := make([]float32, len(u.o.Formats)) // each format's shared scale
	if slices.ContainsFunc(u.o.Formats, func(f Format) bool { return f.Info != nil && f.Info.Shared != nil }) {
		amax, err := u.amax(ctx, idx)
		if err != nil {
			return err
		}
		for k, f := range u.o.Formats {
			if f.Info != nil && f.Info.Shared != nil {
				shared[k] = f.Info.Shared(amax)
			}
		}
	}
	global := float32(0)
	for k, f := range u.o.Formats {
		if f.Info != nil && f.Info.Shared != nil {
			global = shared[k]
			break
		}
	}
	for _, i := range idx {
		m, d := u.mods[i], &u.res.Modules[i]
		d.Global = global
		for _, rs := range convert.Slabs(m) {
			if err := ctx.Err(); err != nil {
				return err
			}
			vals, first, err := u.decode(m, rs)
			if err != nil {
				return err
			}
			for k, f := range u.o.Formats {
				var met quantize.Metrics
				if err := u.measure(ctx, &met, f, vals, rs, m.Cols, first, shared[k]); err != nil {
					return fmt.Errorf("compare: %s: module %q: %w", f.Name, m.Name, err)
				}
				d.Metrics[k].Merge(met)
			}
			if u.o.Progress != nil {
				n := int64(rs.R1-rs.R0) * (m.Weight.ByteSize() / int64(max(m.Rows, 1)))
				u.o.Progress(u.done.Add(n), u.res.SourceBytes, m.Name)
			}
		}
	}
	return nil
}

// decode reads and decodes rows rs of m into the unit's buffer.
func (u *unit) decode(m *convert.Module, rs convert.Rows) ([]float32, int64, error) {
	n := (rs.R1 - rs.R0) * m.Cols
	if cap(u.vals) < n {
		u.vals = make([]float32, n)
	}
	vals := u.vals[:n]
	first, err := u.r.Decode(vals, m, rs)
	return vals, first, err
}

// amax returns the largest magnitude of the values of the unit's modules together (from which
// the formats' shared scales come), refusing NaN and ±Inf.
func (u *unit) amax(ctx context.Context, idx []int) (float32, error) {
	var amax float32
	for _, i := range idx {
		m := u.mods[i]
		for _, rs := range convert.Slabs(m) {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			vals, first, err := u.decode(m, rs)
			if err != nil {
				return 0, err
			}
			if err := quantize.CheckFinite(m.Weight.Name, vals, first); err != nil {
				return 0, fmt.Errorf("compare: %w", err)
			}
			for _, v := range vals {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
		}
	}
	return amax, nil
}

// measure quantizes one slab's values with format f and adds the error of the bytes it gives
// to met: the conversion's quantizer and error sums for the format (its registered Measure
// beyond INT4), global its shared scale.
func (u *unit) measure(ctx context.Context, met *quantize.Metrics, f Format, vals []float32, rs convert.Rows, cols int, first int64, global float32) error {
	rows := rs.R1 - rs.R0
	switch f.Kind {
	case KindInt4:
		opt := quantize.Int4Options{GroupSize: f.Group, Method: u.o.Method, Workers: 1, FirstRow: rs.R0}
		if err := quantize.QuantizeInt4Into(ctx, &u.i4, vals, rows, cols, opt); err != nil {
			return err
		}
		if err := met.AddInt4(vals, &u.i4, first); err != nil {
			return err
		}
		met.Clipped += u.i4.Clipped
		return nil
	}
	return f.Info.Measure(ctx, met, vals, rows, cols, rs.R0, first, u.o.Method, global)
}
