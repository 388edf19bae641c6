package reportview

import (
	"image/color"
	"testing"
)

// TestColourBarApartFromHeatmap: a strip of white lies between each heatmap and its colour bar
// (the bar's unit, once written along its left side, touched the heatmap).
func TestColourBarApartFromHeatmap(t *testing.T) {
	rep := synthReport(4, 8, 0, 1)
	img := renderPNG(t, NewView("r", rep, Query{}, Thresholds{}))
	scale := float64(img.Bounds().Dx()) / figWidth
	x0, x1 := int((figWidth-barWidth-barGap+4)*scale), int((figWidth-barWidth-2)*scale)
	h := (&heatPanel{layers: 4}).height()
	for y := int((titleHeight + 30) * scale); y < int((titleHeight+h-40)*scale); y++ {
		for x := x0; x < x1; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r != 0xffff || g != 0xffff || b != 0xffff {
				t.Fatalf("pixel (%d, %d) between the heatmap and its colour bar is %v, want white", x, y, color.RGBAModel.Convert(img.At(x, y)))
			}
		}
	}
}
