package reportview

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// intTicks marks whole numbers (layer and expert indices, tensor counts) with a 1, 2 or 5 step
// that gives about eight labels.
type intTicks struct{}

// Ticks implements plot.Ticker.
func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	step := niceStep((hi-lo)/8, true)
	var ts []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return ts
}

// shortTicks is plot.DefaultTicks with labels in their shortest form ("52.5", not "52.50").
type shortTicks struct{}

// Ticks implements plot.Ticker.
func (shortTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten (at least 1 for whole numbers).
func niceStep(x float64, whole bool) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			if whole && m*p < 1 {
				return 1
			}
			return m * p
		}
	}
	return 10 * p
}
