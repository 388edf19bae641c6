package reportview

import (
	"io"
	"testing"
)

// BenchmarkPlot renders the pictures of a GLM-5-sized report: 78 layers × 256 routed experts × 3
// projections (59 904 expert tensors) plus 78 attention rows.
func BenchmarkPlot(b *testing.B) {
	v := NewView("synthetic.json", synthReport(78, 256, 0, 6), Query{Top: 20}, NoThresholds)
	for _, format := range []string{FormatPNG, FormatSVG} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := WritePlot(io.Discard, v, format); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(v.Selected))*float64(b.N)/b.Elapsed().Seconds(), "tensors/s")
		})
	}
}

// BenchmarkView times selecting, sorting and summarizing that report, and the HTML page.
func BenchmarkView(b *testing.B) {
	rep := synthReport(78, 256, 0, 7)
	b.Run("select", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewView("synthetic.json", rep, Query{Top: 20}, NoThresholds)
		}
	})
	b.Run("html", func(b *testing.B) {
		v := NewView("synthetic.json", rep, Query{Top: 20}, NoThresholds)
		b.ReportAllocs()
		for b.Loop() {
			if err := WriteHTML(io.Discard, v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
