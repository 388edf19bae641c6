package reportview

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one line of a LineChart: its points in order, named in the legend.
type Series struct {
	Name string
	X, Y []float64
}

// LineChart is a chart of lines over a whole-number axis (layers), one per series: the picture
// pdq compare draws of SQNR per layer for each format.
type LineChart struct {
	Title, XLabel, YLabel string
	Series                []Series
}

// lineHeight is the height of a line chart, in pixels at plotDPI.
const lineHeight = 560

// WriteLines draws c as PNG or SVG, in the geometry and fonts of WritePlot. Non-finite points
// (an exact encoding's infinite SQNR) are left out. The same chart gives the same bytes.
func WriteLines(w io.Writer, c LineChart, format string) (err error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = c.Title, c.XLabel, c.YLabel
	p.Title.Padding = vg.Points(6)
	p.X.Tick.Marker, p.Y.Tick.Marker = intTicks{}, shortTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-4)
	p.Add(plotter.NewGrid())
	points, lo, hi := 0, math.Inf(1), math.Inf(-1)
	for i, s := range c.Series {
		var xys plotter.XYs
		for j := range s.X {
			if j < len(s.Y) && !math.IsInf(s.Y[j], 0) && !math.IsNaN(s.Y[j]) {
				xys = append(xys, plotter.XY{X: s.X[j], Y: s.Y[j]})
				lo, hi = math.Min(lo, s.Y[j]), math.Max(hi, s.Y[j])
			}
		}
		if len(xys) == 0 {
			continue
		}
		points += len(xys)
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("reportview: line %q: %w", s.Name, err)
		}
		line.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		line.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(i)
		p.Add(line, pts)
		p.Legend.Add(s.Name, line, pts)
	}
	if points == 0 {
		return ErrNothingToPlot
	}
	// Room above the lines for the legend, a line per series.
	span := math.Max(hi-lo, 1)
	p.Y.Min, p.Y.Max = lo-0.05*span, hi+span*(0.1+0.08*float64(len(c.Series)))
	width, height := px(figWidth), px(lineHeight)
	var cw vg.CanvasWriterTo
	switch format {
	case FormatPNG:
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))}
	case FormatSVG:
		cw = vgsvg.New(width, height)
	default:
		return fmt.Errorf("reportview: unknown plot format %q (want png or svg)", format)
	}
	defer func() {
		// gonum/plot reports impossible drawing requests by panicking; turn them into errors.
		if r := recover(); r != nil {
			err = fmt.Errorf("reportview: draw line chart: %v", r)
		}
	}()
	p.Draw(draw.New(cw))
	if _, err := cw.WriteTo(w); err != nil {
		return fmt.Errorf("reportview: write %s: %w", format, err)
	}
	return nil
}
