package reportview

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"pdq/quantize/report"
)

// ErrNothingToPlot is returned when the selection has neither routed experts nor finite values.
var ErrNothingToPlot = errors.New("reportview: nothing to plot in the selection")

// Plot formats.
const (
	FormatPNG = "png"
	FormatSVG = "svg"
)

// Figure geometry, in pixels at plotDPI.
const (
	plotDPI     = 100
	figWidth    = 1400
	histHeight  = 300
	titleHeight = 36
	barWidth    = 110 // the colour bar beside each heatmap, labels included
	barGap      = 24  // between a heatmap and its colour bar
	minMap      = 220
	maxMap      = 520
	maxRaster   = 8192 // pixels along one side of a heatmap raster
)

func px(n float64) vg.Length { return vg.Length(n) * vg.Inch / plotDPI }

// WritePlot draws the view's pictures (heatmaps of SQNR, or of ΔSQNR when comparing, by layer and
// expert for each projection of the routed experts, then histograms of per-tensor values) as
// PNG or SVG. The same view gives the same bytes.
func WritePlot(w io.Writer, v *View, format string) error {
	f, err := newFigure(v)
	if err != nil {
		return err
	}
	if f.empty() {
		return ErrNothingToPlot
	}
	width, height := px(figWidth), px(f.height())
	var c vg.CanvasWriterTo
	switch format {
	case FormatPNG:
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))}
	case FormatSVG:
		c = vgsvg.New(width, height)
	default:
		return fmt.Errorf("reportview: unknown plot format %q (want png or svg)", format)
	}
	if err := f.draw(draw.New(c)); err != nil {
		return err
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("reportview: write %s: %w", format, err)
	}
	return nil
}

// mapHeight is the height of one heatmap panel: about 5 px per layer.
func (hp *heatPanel) height() float64 {
	return math.Min(maxMap, math.Max(minMap, float64(hp.layers*5+90)))
}

func (f *figure) height() float64 {
	h := float64(titleHeight)
	for i := range f.maps {
		h += f.maps[i].height()
	}
	if len(f.hists) > 0 {
		h += histHeight
	}
	return h
}

// draw lays the panels out top to bottom: title, heatmaps, one row of histograms.
func (f *figure) draw(dc draw.Canvas) (err error) {
	defer func() {
		// gonum/plot reports impossible drawing requests by panicking; turn them into errors.
		if r := recover(); r != nil {
			err = fmt.Errorf("reportview: draw plot: %v", r)
		}
	}()
	top := dc.Max.Y
	sub := func(x0, x1 float64, h float64) draw.Canvas {
		r := vg.Rectangle{Min: vg.Point{X: dc.Min.X + px(x0), Y: top - px(h)}, Max: vg.Point{X: dc.Min.X + px(x1), Y: top}}
		return draw.Canvas{Canvas: dc.Canvas, Rectangle: r}
	}
	tc := sub(0, figWidth, titleHeight)
	sty := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YCenter}
	sty.Font.Size = vg.Points(13)
	tc.FillText(sty, vg.Point{X: (tc.Min.X + tc.Max.X) / 2, Y: (tc.Min.Y + tc.Max.Y) / 2}, f.title)
	top -= px(titleHeight)
	for i := range f.maps {
		hp := &f.maps[i]
		h := hp.height()
		cmap := f.colourMap(hp.lo, hp.hi)
		mapPlot(hp, cmap, f.delta).Draw(sub(0, figWidth-barWidth-barGap, h))
		barPlot(cmap, f.delta).Draw(sub(figWidth-barWidth, figWidth, h))
		top -= px(h)
	}
	if n := len(f.hists); n > 0 {
		w := float64(figWidth) / float64(n)
		for i := range f.hists {
			histPlot(&f.hists[i], f.delta, f.marker).Draw(sub(float64(i)*w, float64(i+1)*w, histHeight))
		}
	}
	return nil
}

// colourMap is dark for low SQNR (the tensors to look at) and light, but never white like the
// page, for high; for changes, red for worse and blue for better, white at zero.
func (f *figure) colourMap(lo, hi float64) palette.ColorMap {
	if f.delta {
		return newScale(moreland.SmoothBlueRed(), lo, hi, 1, true)
	}
	return newScale(moreland.Kindlmann(), lo, hi, 0.9, false)
}

// scale shows lo..hi with the first part (top, a fraction) of a colour map, reversed with flip.
type scale struct {
	palette.ColorMap
	lo, hi float64
	flip   bool
}

func newScale(m palette.ColorMap, lo, hi, top float64, flip bool) scale {
	m.SetMin(lo)
	m.SetMax(lo + (hi-lo)/top)
	return scale{ColorMap: m, lo: lo, hi: hi, flip: flip}
}

// Min is the lowest value shown.
func (s scale) Min() float64 { return s.lo }

// Max is the highest value shown.
func (s scale) Max() float64 { return s.hi }

// At returns the colour of v, which must lie within Min..Max.
func (s scale) At(v float64) (color.Color, error) {
	if s.flip {
		v = s.hi - (v - s.lo)
	}
	return s.ColorMap.At(v)
}

var (
	missingColour = color.NRGBA{R: 0xe2, G: 0xe2, B: 0xea, A: 0xff} // a bluish grey that anti-aliased text never makes
	histColours   = []color.NRGBA{{0x3b, 0x6e, 0xa8, 0xff}, {0xd0, 0x7a, 0x2c, 0xff}, {0x4f, 0x9a, 0x5a, 0xff}, {0x8e, 0x5a, 0xa8, 0xff}, {0xb8, 0x3b, 0x5e, 0xff}}
)

func mapPlot(hp *heatPanel, cmap palette.ColorMap, delta bool) *plot.Plot {
	p := plot.New()
	what := "SQNR dB"
	if delta {
		what = "ΔSQNR dB"
	}
	p.Title.Text = fmt.Sprintf("%s %s: %s by layer and expert", hp.output, hp.projection, what)
	if hp.clipped {
		p.Title.Text += " (colours stop at the 99th percentile)"
	}
	p.X.Label.Text = "expert"
	p.Y.Label.Text = "layer"
	p.Add(&heatmap{hp: hp, cmap: cmap})
	p.X.Min, p.X.Max = float64(hp.expert0)-0.5, float64(hp.expert0+hp.experts)-0.5
	p.Y.Min, p.Y.Max = float64(hp.layer0)-0.5, float64(hp.layer0+hp.layers)-0.5
	p.Y.Scale = plot.InvertedScale{Normalizer: plot.LinearScale{}}
	p.X.Tick.Marker, p.Y.Tick.Marker = intTicks{}, intTicks{}
	p.Title.Padding = vg.Points(6)
	return p
}

func barPlot(cmap palette.ColorMap, delta bool) *plot.Plot {
	p := plot.New()
	// The unit goes above the bar, level with the heatmap's title: written along the axis, on
	// the bar's left, it touched the heatmap beside it.
	p.Title.Text = "SQNR dB"
	if delta {
		p.Title.Text = "ΔSQNR dB"
	}
	p.Add(&colourBar{cmap: cmap})
	p.HideX()
	p.Y.Tick.Marker = shortTicks{}
	return p
}

func histPlot(h *histPanel, delta bool, marker float64) *plot.Plot {
	p := plot.New()
	what := "SQNR"
	if delta {
		what = "ΔSQNR"
	}
	p.Title.Text = fmt.Sprintf("%s %s: %s of %d tensors", h.output, h.scheme, what, len(h.vals))
	if h.infinite > 0 {
		p.Title.Text += fmt.Sprintf(" (+%d exact)", h.infinite)
	}
	p.X.Label.Text = what + " dB"
	p.Y.Label.Text = "tensors"
	p.X.Tick.Marker, p.Y.Tick.Marker = shortTicks{}, intTicks{}
	p.Title.Padding = vg.Points(6)
	lo, hi, counts := bins(h.vals, binCount(len(h.vals)))
	w := (hi - lo) / float64(len(counts))
	hist := &plotter.Histogram{Width: w, FillColor: histColour(h.scheme)}
	hist.LineStyle.Width = vg.Points(0.5)
	hist.LineStyle.Color = color.White
	for i, c := range counts {
		hist.Bins = append(hist.Bins, plotter.HistogramBin{Min: lo + float64(i)*w, Max: lo + float64(i+1)*w, Weight: c})
	}
	p.Add(hist)
	if !math.IsNaN(marker) && marker >= lo-(hi-lo) && marker <= hi+(hi-lo) {
		line, err := plotter.NewLine(plotter.XYs{{X: marker, Y: 0}, {X: marker, Y: maxOf(counts)}})
		if err == nil {
			line.Color = color.NRGBA{0xc0, 0x10, 0x10, 0xff}
			line.Width = vg.Points(1.5)
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(line)
		}
	}
	return p
}

func histColour(scheme string) color.Color {
	switch report.Info(report.Scheme(scheme)).Family {
	case report.FamilyInt4:
		return histColours[0]
	case report.FamilyFP8:
		return histColours[1]
	case report.FamilyDense:
		return histColours[2]
	case report.FamilyFP4:
		return histColours[4]
	}
	return histColours[3]
}

func maxOf(s []float64) float64 {
	m := 0.0
	for _, v := range s {
		m = math.Max(m, v)
	}
	return m
}

// heatmap draws a panel's cells as one raster made at the canvas resolution, so that every cell
// keeps sharp edges and no cell is averaged away, however many experts there are.
type heatmap struct {
	hp   *heatPanel
	cmap palette.ColorMap
}

// Plot implements plot.Plotter.
func (h *heatmap) Plot(c draw.Canvas, p *plot.Plot) {
	hp := h.hp
	trX, trY := p.Transforms(&c)
	xa, xb := trX(float64(hp.expert0)-0.5), trX(float64(hp.expert0+hp.experts)-0.5)
	ya, yb := trY(float64(hp.layer0)-0.5), trY(float64(hp.layer0+hp.layers)-0.5)
	rect := vg.Rectangle{Min: vg.Point{X: min(xa, xb), Y: min(ya, yb)}, Max: vg.Point{X: max(xa, xb), Y: max(ya, yb)}}
	dpi := float64(plotDPI)
	if d, ok := c.Canvas.(interface{ DPI() float64 }); ok {
		dpi = d.DPI()
	}
	// At least one pixel per cell (up to a bound), so that a lone bad expert is never dropped.
	wpx := max(int(math.Round((rect.Max.X - rect.Min.X).Dots(dpi))), min(hp.experts, maxRaster), 1)
	hpx := max(int(math.Round((rect.Max.Y - rect.Min.Y).Dots(dpi))), min(hp.layers, maxRaster), 1)
	// Colour each cell once, then paint pixel spans.
	colours := make([]color.NRGBA, len(hp.vals))
	for i, v := range hp.vals {
		colours[i] = cellColour(h.cmap, v)
	}
	img := image.NewNRGBA(image.Rect(0, 0, wpx, hpx))
	topIsFirst := ya > yb // layer0 is drawn at the top (the axis is inverted)
	for y := range hpx {
		row := y * hp.layers / hpx
		if !topIsFirst {
			row = hp.layers - 1 - row
		}
		line := img.Pix[y*img.Stride : y*img.Stride+4*wpx]
		flipX := xa > xb
		for x := range wpx {
			col := x * hp.experts / wpx
			if flipX {
				col = hp.experts - 1 - col
			}
			cc := colours[row*hp.experts+col]
			line[4*x], line[4*x+1], line[4*x+2], line[4*x+3] = cc.R, cc.G, cc.B, cc.A
		}
	}
	c.DrawImage(rect, img)
}

// DataRange implements plot.DataRanger.
func (h *heatmap) DataRange() (xmin, xmax, ymin, ymax float64) {
	hp := h.hp
	return float64(hp.expert0) - 0.5, float64(hp.expert0+hp.experts) - 0.5, float64(hp.layer0) - 0.5, float64(hp.layer0+hp.layers) - 0.5
}

// colourBar is a vertical legend of a colour map, drawn like the heatmaps as a raster the size of
// its box (plotter.ColorBar's one-pixel-wide image is letterboxed to a line in SVG).
type colourBar struct{ cmap palette.ColorMap }

// Plot implements plot.Plotter.
func (b *colourBar) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	lo, hi := b.cmap.Min(), b.cmap.Max()
	rect := vg.Rectangle{Min: vg.Point{X: trX(0), Y: trY(lo)}, Max: vg.Point{X: trX(1), Y: trY(hi)}}
	dpi := float64(plotDPI)
	if d, ok := c.Canvas.(interface{ DPI() float64 }); ok {
		dpi = d.DPI()
	}
	wpx := max(int(math.Round((rect.Max.X - rect.Min.X).Dots(dpi))), 1)
	hpx := max(int(math.Round((rect.Max.Y - rect.Min.Y).Dots(dpi))), 2)
	img := image.NewNRGBA(image.Rect(0, 0, wpx, hpx))
	for y := range hpx {
		cc := cellColour(b.cmap, hi-(hi-lo)*(float64(y)+0.5)/float64(hpx))
		for x := range wpx {
			img.SetNRGBA(x, y, cc)
		}
	}
	c.DrawImage(rect, img)
}

// DataRange implements plot.DataRanger.
func (b *colourBar) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, 1, b.cmap.Min(), b.cmap.Max()
}

// cellColour maps v into the colour map, clamping to its ends; NaN (no tensor) is a light grey.
func cellColour(m palette.ColorMap, v float64) color.NRGBA {
	if math.IsNaN(v) {
		return missingColour
	}
	v = math.Min(math.Max(v, m.Min()), m.Max())
	c, err := m.At(v)
	if err != nil {
		return missingColour
	}
	return color.NRGBAModel.Convert(c).(color.NRGBA)
}
