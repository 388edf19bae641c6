package compare

import (
	"math"
	"slices"

	"pdq/quantize"
	"pdq/quantize/report"
	"pdq/serving"
)

// Figure is the error of one format over a group of modules, in the statistics of a
// conversion's report summary: the mean over the modules of each module's SQNR in dB (the
// figure convert, verify and report print), the lowest, and the SQNR of their elements
// together, 10·log10(Σx²/Σ(x−x̂)²).
type Figure struct {
	Layer      int          `json:"layer"`                // -1: every layer (or none)
	Projection string       `json:"projection,omitempty"` // "": every projection
	Modules    int          `json:"modules"`
	Elements   int64        `json:"elements"`
	MeanSQNR   report.Float `json:"mean_sqnr_db"`
	MinSQNR    report.Float `json:"min_sqnr_db"`
	SQNR       report.Float `json:"sqnr_db"`
	// SumSq and SumSqErr are Σx² and Σ(x−x̂)², for totals over groups.
	SumSq    float64 `json:"sum_sq"`
	SumSqErr float64 `json:"sum_sq_err"`
	Clipped  int64   `json:"clipped"`
}

// Summary is one format's row: its error overall, per projection, per layer and per layer and
// projection, the bytes it stores and, with a serving setup, what it leaves a decode server.
type Summary struct {
	Format        string  `json:"format"`
	GroupSize     int     `json:"group_size"` // quantize.PerChannel for one scale per row
	BitsPerWeight float64 `json:"bits_per_weight"`
	Overall       Figure  `json:"overall"`
	// Projections, Layers and Cells are in the order of the modules' first appearance
	// (projections) and by layer.
	Projections []Figure `json:"projections"`
	Layers      []Figure `json:"layers"`
	Cells       []Figure `json:"cells"`
	// Worst is the cell (layer and projection) of the lowest mean SQNR, the first of equals.
	Worst Figure `json:"worst"`
	// TargetBytes is what the decode checkpoint holds for every target module (all layers and
	// experts, measured or not) in this format; DecodeBytes the whole decode checkpoint's
	// tensor bytes.
	TargetBytes int64 `json:"target_bytes"`
	DecodeBytes int64 `json:"decode_bytes"`
	// Serving is the decode server's plan with this format (nil without a serving setup).
	Serving *serving.Capacity `json:"serving,omitempty"`
	// Warnings are the engines' rules this format breaks on the serving setup.
	Warnings []string `json:"warnings,omitempty"`
}

// acc adds modules' metrics into a Figure, in the modules' order (as a conversion's report
// adds its rows).
type acc struct {
	f            Figure
	m            quantize.Metrics
	sumDB, minDB float64
}

func (a *acc) add(m quantize.Metrics) {
	if a.f.Modules == 0 {
		a.minDB = math.Inf(1)
	}
	a.f.Modules++
	a.m.Merge(m)
	db := float64(report.Float(m.SQNR()))
	a.sumDB += db
	a.minDB = math.Min(a.minDB, db)
}

func (a *acc) figure() Figure {
	f := a.f
	f.Elements, f.SumSq, f.SumSqErr, f.Clipped = a.m.N, a.m.SumSqRef, a.m.SumSqErr, a.m.Clipped
	f.SQNR = report.Float(a.m.SQNR())
	f.MeanSQNR, f.MinSQNR = report.Float(a.sumDB/float64(max(f.Modules, 1))), report.Float(a.minDB)
	return f
}

// Summaries returns one Summary per format, its figures added in the modules' order (the same
// figures for every worker count). The bytes and serving figures are left to Sizes.
func (r *Result) Summaries() []Summary {
	var projs []string
	var layers []int
	for _, m := range r.Modules {
		if !slices.Contains(projs, m.Projection) {
			projs = append(projs, m.Projection)
		}
		if !slices.Contains(layers, m.Layer) {
			layers = append(layers, m.Layer)
		}
	}
	slices.Sort(layers)
	out := make([]Summary, len(r.Formats))
	for k, f := range r.Formats {
		cols := 0
		if len(r.Modules) > 0 {
			cols = r.Modules[0].Cols
		}
		s := Summary{Format: f.Name, GroupSize: f.Group, BitsPerWeight: f.BitsPerWeight(cols)}
		all := acc{f: Figure{Layer: -1}}
		byProj := make([]acc, len(projs))
		byLayer := make([]acc, len(layers))
		cells := make([]acc, len(projs)*len(layers))
		for _, m := range r.Modules {
			pi, li := slices.Index(projs, m.Projection), slices.Index(layers, m.Layer)
			all.add(m.Metrics[k])
			byProj[pi].add(m.Metrics[k])
			byLayer[li].add(m.Metrics[k])
			cells[li*len(projs)+pi].add(m.Metrics[k])
		}
		s.Overall = all.figure()
		for i, p := range projs {
			byProj[i].f = Figure{Layer: -1, Projection: p, Modules: byProj[i].f.Modules}
			s.Projections = append(s.Projections, byProj[i].figure())
		}
		for i, l := range layers {
			byLayer[i].f = Figure{Layer: l, Modules: byLayer[i].f.Modules}
			s.Layers = append(s.Layers, byLayer[i].figure())
			for j, p := range projs {
				c := &cells[i*len(projs)+j]
				if c.f.Modules == 0 {
					continue
				}
				c.f = Figure{Layer: l, Projection: p, Modules: c.f.Modules}
				fig := c.figure()
				s.Cells = append(s.Cells, fig)
				if len(s.Cells) == 1 || fig.MeanSQNR < s.Worst.MeanSQNR {
					s.Worst = fig
				}
			}
		}
		out[k] = s
	}
	return out
}
