package reportview

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pdq/quantize/report"
)

// synthReport is a report of a model with routed experts in layers first..first+layers-1, three
// projections each, SQNR around 20 dB, plus one attention row per layer.
func synthReport(layers, experts, first int, seed uint64) *report.Report {
	rng := rand.New(rand.NewPCG(seed, 1))
	rep := &report.Report{Tool: "pdq test", Source: "synthetic"}
	for l := first; l < first+layers; l++ {
		for e := range experts {
			for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
				rep.Tensors = append(rep.Tensors, expertRow(l, e, p, 20+rng.NormFloat64()*0.6))
			}
		}
		rep.Tensors = append(rep.Tensors, row("decode", fmt.Sprintf("model.layers.%d.self_attn.o_proj", l), "attention", "bf16", 55+rng.NormFloat64(), 0.002))
	}
	return rep
}

// set changes the SQNR of one expert row.
func set(rep *report.Report, layer, expert int, proj string, sqnr float64) {
	for i := range rep.Tensors {
		t := &rep.Tensors[i]
		if t.Layer == layer && t.Expert == expert && t.Projection == proj {
			t.SQNR = report.Float(sqnr)
			return
		}
	}
	panic("no such row")
}

func drop(rep *report.Report, layer, expert int, proj string) {
	for i, t := range rep.Tensors {
		if t.Layer == layer && t.Expert == expert && t.Projection == proj {
			rep.Tensors = append(rep.Tensors[:i], rep.Tensors[i+1:]...)
			return
		}
	}
	panic("no such row")
}

func renderPNG(t testing.TB, v *View) image.Image {
	t.Helper()
	var b bytes.Buffer
	if err := WritePlot(&b, v, FormatPNG); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// box is the bounding box of the pixels of colour c left of the colour bars, and their count.
func box(img image.Image, c color.NRGBA) (image.Rectangle, int) {
	var r image.Rectangle
	n := 0
	b := img.Bounds()
	b.Max.X = figWidth - barWidth
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA) == c {
				p := image.Rect(x, y, x+1, y+1)
				if n == 0 {
					r = p
				} else {
					r = r.Union(p)
				}
				n++
			}
		}
	}
	return r, n
}

// TestPlotPlacesCells checks that a cell lands in its panel, row and column: one down_proj expert
// gets a low SQNR and one up_proj expert is missing.
func TestPlotPlacesCells(t *testing.T) {
	const layers, experts, first = 4, 10, 3
	rep := synthReport(layers, experts, first, 1)
	for _, r := range rep.Tensors {
		if r.Role == "routed_experts" {
			set(rep, r.Layer, r.Expert, r.Projection, 20) // flat, so the colours below are exact
		}
	}
	set(rep, 3, 0, "gate_proj", 10) // pins the bottom of the colour range
	for e := range experts {
		set(rep, 6, e, "gate_proj", 25) // 8% of the cells: the 99th percentile
	}
	set(rep, 3, 1, "gate_proj", 30) // an outlier above it, drawn in the top colour
	set(rep, 5, 7, "down_proj", 15)
	drop(rep, 4, 2, "up_proj")
	v := NewView("synthetic.json", rep, Query{}, NoThresholds)
	f, err := newFigure(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.maps) != 3 || f.maps[0].projection != "gate_proj" || f.maps[2].projection != "down_proj" {
		t.Fatalf("panels: %+v", f.maps)
	}
	if f.maps[0].lo != 10 || f.maps[0].hi != 25 || !f.maps[0].clipped || f.maps[2].lo != 10 || f.maps[2].hi != 25 {
		t.Fatalf("colour range %v..%v (clipped %v), want 10..25 (the 99th percentile) for every panel of the output",
			f.maps[0].lo, f.maps[0].hi, f.maps[0].clipped)
	}
	img := renderPNG(t, v)
	if b := img.Bounds(); b.Dx() != figWidth || b.Dy() != int(f.height()) {
		t.Fatalf("figure is %v, want %dx%v", b, figWidth, f.height())
	}
	mapH := f.maps[0].height()
	panelOf := func(y int) int { return int((float64(y) - titleHeight) / mapH) }

	low := cellColour(f.colourMap(10, 25), 15)
	r, n := box(img, low)
	// The plot area is about 1200 px wide (10 columns) and 150 px high (4 rows).
	if n < 500 || r.Dx() < 80 || r.Dx() > 160 || r.Dy() < 20 || r.Dy() > 60 {
		t.Fatalf("the 15 dB cell covers %d px in %v, want one cell about 120x35 px", n, r)
	}
	if p := panelOf(r.Min.Y); p != 2 || panelOf(r.Max.Y-1) != 2 {
		t.Fatalf("the 15 dB cell is in panel %d (%v), want 2 (down_proj)", p, r)
	}
	// Column 7 of 10 and row 2 of 4 (layer 5; layer 3 on top).
	rg, _ := box(img, cellColour(f.colourMap(10, 25), 20))
	colW := float64(rg.Dx()) / experts // the 20 dB cells span every column
	if c := float64(r.Min.X-rg.Min.X) / colW; math.Abs(c-7) > 0.1 {
		t.Fatalf("the 15 dB cell starts at column %.2f, want 7", c)
	}
	panelTop := titleHeight + 2*mapH
	var plotTop, plotBottom int
	for y := int(panelTop); y < int(panelTop+mapH); y++ {
		if color.NRGBAModel.Convert(img.At(rg.Min.X+2, y)).(color.NRGBA) != (color.NRGBA{255, 255, 255, 255}) {
			if plotTop == 0 {
				plotTop = y
			}
			plotBottom = y
		}
	}
	cellH := float64(plotBottom-plotTop+1) / layers
	if row := float64(r.Min.Y-plotTop) / cellH; math.Abs(row-2) > 0.15 {
		t.Fatalf("the 15 dB cell starts at row %.2f (plot rows %d..%d), want 2", row, plotTop, plotBottom)
	}
	m, nm := box(img, missingColour)
	if nm < 500 || panelOf(m.Min.Y) != 1 || panelOf(m.Max.Y-1) != 1 {
		t.Fatalf("the missing cell: %d px in %v, want one cell in panel 1 (up_proj)", nm, m)
	}
}

func TestPlotDeterministicAndFormats(t *testing.T) {
	rep := synthReport(5, 16, 1, 2)
	v := NewView("synthetic.json", rep, Query{}, Thresholds{SQNRBelow: 19, RelRMSEAbove: math.Inf(1)})
	for _, format := range []string{FormatPNG, FormatSVG} {
		var a, b bytes.Buffer
		if err := WritePlot(&a, v, format); err != nil {
			t.Fatal(err)
		}
		if err := WritePlot(&b, v, format); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("%s: two renderings differ", format)
		}
		if format == FormatSVG {
			checkSVG(t, a.Bytes())
		}
	}
	if err := WritePlot(io.Discard, v, "gif"); err == nil {
		t.Fatal("gif accepted")
	}
}

func checkSVG(t *testing.T, data []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var root string
	images := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "image" {
				images++
			}
		}
	}
	if root != "svg" || images < 3 {
		t.Fatalf("svg root %q with %d images, want svg with a raster per heatmap", root, images)
	}
}

func TestPlotDiff(t *testing.T) {
	a, b := synthReport(3, 4, 0, 3), synthReport(3, 4, 0, 4)
	v := NewView("a.json", a, Query{}, NoThresholds)
	v.Compare("b.json", b)
	f, err := newFigure(v)
	if err != nil {
		t.Fatal(err)
	}
	if !f.delta || len(f.maps) != 3 || f.maps[0].lo != -f.maps[0].hi || !strings.Contains(f.title, "ΔSQNR") {
		t.Fatalf("diff figure: delta %v, %d maps, range %v..%v, title %q", f.delta, len(f.maps), f.maps[0].lo, f.maps[0].hi, f.title)
	}
	c := v.Diff.Changes[0]
	if got := f.maps[0].vals[0]; c.Layer == 0 && c.Expert == 0 && c.Projection == "gate_proj" && got != float64(c.DeltaSQNR) {
		t.Fatalf("cell (0,0) = %v, want Δ %v", got, c.DeltaSQNR)
	}
	renderPNG(t, v)
}

func TestPlotNothingOrTooBig(t *testing.T) {
	rep := &report.Report{Tensors: []report.TensorReport{row("decode", "a", "attention", "bf16", math.Inf(1), 0)}}
	if err := WritePlot(io.Discard, NewView("r.json", rep, Query{}, NoThresholds), FormatPNG); !errors.Is(err, ErrNothingToPlot) {
		t.Fatalf("err = %v, want ErrNothingToPlot", err)
	}
	// Histograms alone when there are no routed experts.
	rep.Tensors = append(rep.Tensors, row("decode", "b", "attention", "bf16", 50, 0.003))
	if err := WritePlot(io.Discard, NewView("r.json", rep, Query{}, NoThresholds), FormatPNG); err != nil {
		t.Fatal(err)
	}
	big := &report.Report{Tensors: []report.TensorReport{expertRow(0, 0, "up_proj", 20), expertRow(100000, 1000, "up_proj", 20)}}
	err := WritePlot(io.Discard, NewView("r.json", big, Query{}, NoThresholds), FormatPNG)
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("err = %v, want a grid too large to plot", err)
	}
}

// TestPlotFullSize renders the routed experts of a GLM-5-sized model (78 layers of 256 experts,
// three projections) once; BenchmarkPlot times it.
func TestPlotFullSize(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size plot in -short mode")
	}
	v := NewView("synthetic.json", synthReport(78, 256, 0, 5), Query{}, NoThresholds)
	img := renderPNG(t, v)
	if b := img.Bounds(); b.Dx() != figWidth || b.Dy() < 3*maxMap {
		t.Fatalf("figure %v", b)
	}
}

func TestColourRange(t *testing.T) {
	many := func(n int, v float64, extra ...float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = v + float64(i%7)*0.1
		}
		return append(s, extra...)
	}
	for _, tc := range []struct {
		name        string
		vals        []float64
		delta       bool
		lo, hi      float64
		clipped     bool
		approximate bool
	}{
		{"empty", nil, false, 0, 1, false, false},
		{"empty delta", nil, true, -1, 1, false, false},
		{"flat", []float64{20, 20, 20}, false, 19.5, 20.5, false, false},
		{"few values: min to max", []float64{18, 21, 19}, false, 18, 21, false, false},
		{"outlier above the 99th percentile", many(300, 20, 26), false, 20, 20.6, true, true},
		{"a bad tensor stays the bottom", many(300, 20, 12), false, 12, 20.6, false, true},
		{"changes: symmetric", []float64{-0.2, 0.5, 0.1}, true, -0.5, 0.5, false, false},
		{"no change", []float64{0, 0}, true, -1, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, clipped := colourRange(tc.vals, tc.delta)
			ok := lo == tc.lo && hi == tc.hi
			if tc.approximate {
				ok = math.Abs(lo-tc.lo) < 1e-9 && math.Abs(hi-tc.hi) < 1e-9
			}
			if !ok || clipped != tc.clipped {
				t.Fatalf("got %v..%v clipped %v, want %v..%v clipped %v", lo, hi, clipped, tc.lo, tc.hi, tc.clipped)
			}
		})
	}
}
