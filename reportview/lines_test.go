package reportview

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestWriteLines: a line chart is drawn the same bytes every time, in both formats; series
// without a finite point are left out, and a chart without any is ErrNothingToPlot.
func TestWriteLines(t *testing.T) {
	c := LineChart{Title: "SQNR per layer", XLabel: "layer", YLabel: "SQNR dB", Series: []Series{
		{Name: "int4-g32", X: []float64{1, 2, 3}, Y: []float64{20.1, 19.8, 20.4}},
		{Name: "nvfp4", X: []float64{1, 2, 3}, Y: []float64{21.7, math.Inf(1), 21.9}},
		{Name: "exact", X: []float64{1}, Y: []float64{math.Inf(1)}},
	}}
	for _, format := range []string{FormatSVG, FormatPNG} {
		var a, b bytes.Buffer
		if err := WriteLines(&a, c, format); err != nil {
			t.Fatal(err)
		}
		if err := WriteLines(&b, c, format); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) || a.Len() == 0 {
			t.Errorf("%s: %d and %d bytes, not the same", format, a.Len(), b.Len())
		}
		if format == FormatSVG && (!strings.Contains(a.String(), "int4-g32") || strings.Contains(a.String(), ">exact<")) {
			t.Errorf("svg legend: want int4-g32 and no series without points")
		}
	}
	if err := WriteLines(&bytes.Buffer{}, LineChart{Series: c.Series[2:]}, FormatSVG); !errors.Is(err, ErrNothingToPlot) {
		t.Errorf("no finite point: %v, want ErrNothingToPlot", err)
	}
	if err := WriteLines(&bytes.Buffer{}, c, "pdf"); err == nil {
		t.Error("pdf: no error")
	}
}
