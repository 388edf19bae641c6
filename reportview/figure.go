package reportview

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"pdq/quantize/rules"
)

// figure is what the pictures show: one heatmap per output and projection of the routed experts
// (rows are layers, columns experts) and one histogram per output and scheme.
type figure struct {
	title  string
	delta  bool // values are ΔSQNR (A − B) rather than SQNR
	maps   []heatPanel
	hists  []histPanel
	marker float64 // a vertical line on the histograms (the SQNR threshold); NaN for none
}

// heatPanel is one heatmap: the value of cell (layer, expert), NaN where there is no tensor.
type heatPanel struct {
	output, projection string
	layer0, expert0    int // smallest layer and expert shown
	layers, experts    int
	vals               []float64 // layers × experts, row-major
	lo, hi             float64   // colour range, shared by the panels of one output
	clipped            bool      // some values of the output lie beyond lo..hi
}

// histPanel is the distribution of finite values of one output and scheme.
type histPanel struct {
	output, scheme string
	vals           []float64
	infinite       int // values left out because they are infinite (exact tensors)
}

// point is one value placed by output, scheme, layer, expert and projection.
type point struct {
	output, scheme, role, projection string
	layer, expert                    int
	v                                float64
}

// Bounds on the panels of one figure; more are left out and the title says so.
const (
	maxMaps  = 12
	maxHists = 6
)

// maxCells bounds one heatmap (layers × experts), so that a hostile report cannot ask for a
// huge grid: 4096 layers of 1024 experts.
const maxCells = 1 << 22

// newFigure collects the view's points: SQNR of the selected rows, or ΔSQNR of the changes when
// the view compares two reports.
func newFigure(v *View) (*figure, error) {
	var pts []point
	f := &figure{marker: math.NaN()}
	if v.Diff != nil {
		f.delta = true
		f.title = fmt.Sprintf("ΔSQNR (dB) = A − B: %s against %s", v.Name, v.Diff.Name)
		for _, c := range v.Diff.Changes {
			pts = append(pts, point{c.Output, schemePair(c.SchemeA, c.SchemeB), c.Role, c.Projection, c.Layer, c.Expert, float64(c.DeltaSQNR)})
		}
	} else {
		f.title = "SQNR (dB): " + v.Name
		if th := v.Thresholds.SQNRBelow; th > math.Inf(-1) {
			f.marker = th
		}
		for _, t := range v.Selected {
			pts = append(pts, point{t.Output, t.Scheme, t.Role, t.Projection, t.Layer, t.Expert, float64(t.SQNR)})
		}
	}
	var err error
	if f.maps, err = heatPanels(pts, f.delta); err != nil {
		return nil, err
	}
	// A calibrated run also gets the distribution of the activation-weighted SQNR that its
	// search optimised, as a histogram of scheme "S weighted".
	if v.Diff == nil {
		for _, t := range v.Selected {
			if t.WeightedSQNR != nil {
				pts = append(pts, point{t.Output, t.Scheme + " weighted", t.Role, t.Projection, t.Layer, t.Expert, float64(*t.WeightedSQNR)})
			}
		}
	}
	f.hists = histPanels(pts)
	if n := len(f.maps); n > maxMaps {
		f.maps = f.maps[:maxMaps]
		f.title += fmt.Sprintf(" (first %d of %d heatmaps)", maxMaps, n)
	}
	if n := len(f.hists); n > maxHists {
		f.hists = f.hists[:maxHists]
		f.title += fmt.Sprintf(" (first %d of %d histograms)", maxHists, n)
	}
	return f, nil
}

// empty reports whether there is nothing to draw.
func (f *figure) empty() bool { return len(f.maps) == 0 && len(f.hists) == 0 }

func heatPanels(pts []point, delta bool) ([]heatPanel, error) {
	type key struct{ output, proj string }
	byKey := map[key][]point{}
	for _, p := range pts {
		if p.role != string(rules.RoleRoutedExpert) || p.layer < 0 || p.expert < 0 {
			continue
		}
		k := key{p.output, p.projection}
		byKey[k] = append(byKey[k], p)
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(b.output, a.output); c != 0 {
			return c
		}
		if c := cmp.Compare(projRank(a.proj), projRank(b.proj)); c != 0 {
			return c
		}
		return cmp.Compare(a.proj, b.proj)
	})
	// One colour range per output so that its projections compare at a glance.
	finite := map[string][]float64{}
	for _, k := range keys {
		for _, p := range byKey[k] {
			if !math.IsInf(p.v, 0) && !math.IsNaN(p.v) {
				finite[k.output] = append(finite[k.output], p.v)
			}
		}
	}
	type span struct {
		lo, hi  float64
		clipped bool
	}
	ranges := map[string]span{}
	for o, vals := range finite {
		lo, hi, clipped := colourRange(vals, delta)
		ranges[o] = span{lo, hi, clipped}
	}
	var out []heatPanel
	for _, k := range keys {
		ps := byKey[k]
		l0, l1, e0, e1 := ps[0].layer, ps[0].layer, ps[0].expert, ps[0].expert
		for _, p := range ps {
			l0, l1, e0, e1 = min(l0, p.layer), max(l1, p.layer), min(e0, p.expert), max(e1, p.expert)
		}
		// l0, e0 ≥ 0 here; each side is compared alone first so that the product cannot overflow.
		if l1-l0 >= maxCells || e1-e0 >= maxCells || (l1-l0+1)*(e1-e0+1) > maxCells {
			return nil, fmt.Errorf("reportview: %s %s: layers %d..%d × experts %d..%d is too large a grid to plot", k.output, k.proj, l0, l1, e0, e1)
		}
		hp := heatPanel{output: k.output, projection: k.proj, layer0: l0, expert0: e0, layers: l1 - l0 + 1, experts: e1 - e0 + 1}
		hp.vals = make([]float64, hp.layers*hp.experts)
		for i := range hp.vals {
			hp.vals[i] = math.NaN()
		}
		for _, p := range ps {
			hp.vals[(p.layer-l0)*hp.experts+p.expert-e0] = p.v
		}
		r, ok := ranges[k.output]
		if !ok {
			r.lo, r.hi, r.clipped = colourRange(nil, delta)
		}
		hp.lo, hp.hi, hp.clipped = r.lo, r.hi, r.clipped
		out = append(out, hp)
	}
	return out, nil
}

// colourRange picks the colours' span: from the lowest value (the worst tensor is always the
// darkest cell) to the 99th percentile, so that a few outliers on the good side do not wash out
// the rest; changes get a span centred on zero out to the 99th percentile of |Δ|. clipped says
// whether some values lie beyond the span (they take its end colour).
func colourRange(vals []float64, delta bool) (lo, hi float64, clipped bool) {
	if len(vals) == 0 {
		if delta {
			return -1, 1, false
		}
		return 0, 1, false
	}
	s := slices.Clone(vals)
	if delta {
		for i, v := range s {
			s[i] = math.Abs(v)
		}
	}
	slices.Sort(s)
	p99 := s[max(int(math.Ceil(0.99*float64(len(s))))-1, 0)]
	if delta {
		m := p99
		if m == 0 {
			m = s[len(s)-1]
		}
		if m == 0 {
			return -1, 1, false
		}
		return -m, m, m < s[len(s)-1]
	}
	lo, hi = s[0], p99
	if hi-lo < 1e-9 {
		hi = s[len(s)-1]
	}
	if hi-lo < 1e-9 {
		return lo - 0.5, hi + 0.5, false
	}
	return lo, hi, hi < s[len(s)-1]
}

// projRank orders projections gate, up, down (and their w1, w3, w2 names) before others.
func projRank(p string) int {
	switch p {
	case "gate_proj", "w1":
		return 0
	case "up_proj", "w3":
		return 1
	case "down_proj", "w2":
		return 2
	}
	return 3
}

func histPanels(pts []point) []histPanel {
	type key struct{ output, scheme string }
	byKey := map[key]*histPanel{}
	var keys []key
	for _, p := range pts {
		k := key{p.output, p.scheme}
		h := byKey[k]
		if h == nil {
			h = &histPanel{output: p.output, scheme: p.scheme}
			byKey[k] = h
			keys = append(keys, k)
		}
		if math.IsInf(p.v, 0) || math.IsNaN(p.v) {
			h.infinite++
			continue
		}
		h.vals = append(h.vals, p.v)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(b.output, a.output); c != 0 {
			return c
		}
		return cmp.Compare(a.scheme, b.scheme)
	})
	var out []histPanel
	for _, k := range keys {
		if h := byKey[k]; len(h.vals) > 0 {
			out = append(out, *h)
		}
	}
	return out
}

// bins counts vals into n equal bins over [lo, hi].
func bins(vals []float64, n int) (lo, hi float64, counts []float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if hi-lo < 1e-9 {
		lo, hi = lo-0.5, hi+0.5
	}
	counts = make([]float64, n)
	w := (hi - lo) / float64(n)
	for _, v := range vals {
		i := int((v - lo) / w)
		counts[min(max(i, 0), n-1)]++
	}
	return lo, hi, counts
}

// binCount picks about √n bins, between 8 and 60.
func binCount(n int) int {
	return min(max(int(math.Ceil(math.Sqrt(float64(n)))), 8), 60)
}
