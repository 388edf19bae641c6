package kernels

import (
	"fmt"
	"math"
)

// Search selects how an INT4 group scale is chosen.
type Search uint8

const (
	// SearchRTN is the compressed-tensors rule: s = bf16(absmax/7.5), q = rne(clamp(x/s, -8, 7)).
	SearchRTN Search = iota
	// SearchMSE picks, per group, the candidate scale with the smallest squared error (BF16
	// rounding of the scale included), then refines it by least squares. The RTN scale is the
	// first candidate and a later one replaces it only when its error is strictly smaller, so
	// the group error is never above the RTN error (in the float32 order of the spec).
	SearchMSE
)

// Int4Params configures QuantizeInt4. Build it with NewInt4Params; the candidate tables are part
// of the specification and are handed as they are to other backends.
type Int4Params struct {
	GroupSize int    // elements per group: a positive multiple of 8 dividing cols
	Search    Search // SearchRTN or SearchMSE
	// Signed allows negative scales (Q4_0 style): the group's extreme may land on -8.
	Signed bool
	// Pos lists positive candidate multipliers k: candidate s = bf16(absmax·k), in order.
	Pos []float32
	// Neg lists the multipliers used when Signed: s = σ·bf16(absmax·k), σ = -sign(extreme), so
	// that the extreme element maps near -8.
	Neg []float32
	// Refine is the maximum number of least-squares refinements s ← bf16(Σx·q/Σq²).
	Refine int
	// WPos lists the coarse positive multipliers of the weighted search for groups whose column
	// weights are not all equal (QuantizeInt4Weighted): a wider range than Pos, since strong
	// weights make the best scale clip low-weight columns much harder. WFine is the step of the
	// fine stage around the best coarse multiplier k: k ± i·WFine for i = 1..WFineN.
	WPos   []float32
	WFine  float32
	WFineN int

	// posPad is 0 followed by Pos, zero-padded to a whole number of 16-lane vectors: set by
	// NewInt4Params (whose Pos rises) for the vector candidate generation; nil otherwise.
	posPad []float32
}

// Search ranges: candidates are r·absmax/7 for r evenly spaced on [rmin, 1] with steps points
// (and r·absmax/8 for signed scales). Larger groups have relatively larger extremes, so their
// best scale clips more. The step counts keep the search within 0.003 dB of an exhaustive
// 400-point search on QUALITY.md's data (g32: 0.0003 dB); per channel, heavy tails want r
// down to 0.2.
type searchRange struct {
	maxGroup int
	rmin     float64
	steps    int
}

var searchRanges = []searchRange{
	{32, 0.80, 16},
	{64, 0.65, 24},
	{128, 0.50, 28},
	{math.MaxInt, 0.20, 48},
}

// TinyAbsMax is the group absolute maximum below which SearchMSE keeps the RTN result: scales of
// such groups could have reciprocals outside the float32 range.
const TinyAbsMax = 0x1p-64

// NewInt4Params returns the parameters for groups of groupSize elements.
func NewInt4Params(groupSize int, search Search, signed bool) (Int4Params, error) {
	if groupSize <= 0 || groupSize%8 != 0 {
		return Int4Params{}, fmt.Errorf("kernels: group size %d is not a positive multiple of 8", groupSize)
	}
	p := Int4Params{GroupSize: groupSize, Search: search, Signed: signed}
	switch search {
	case SearchRTN:
		return p, nil
	case SearchMSE:
	default:
		return Int4Params{}, fmt.Errorf("kernels: unknown search %d", search)
	}
	var rg searchRange
	for _, rg = range searchRanges {
		if groupSize <= rg.maxGroup {
			break
		}
	}
	// rg.steps <= maxCandidates (the search's stack buffer).
	p.Pos = grid(rg.rmin, rg.steps, 7)
	p.posPad = make([]float32, 1+(len(p.Pos)+15)/16*16)
	copy(p.posPad[1:], p.Pos)
	if signed {
		p.Neg = grid(rg.rmin, rg.steps, 8)
	}
	p.Refine = 3
	wmin := min(rg.rmin, weightedRMin)
	p.WPos = grid(wmin, weightedSteps, 7)
	p.WFine = float32((1 - wmin) / float64(weightedSteps-1) / 7 / float64(weightedFineN+1))
	p.WFineN = weightedFineN
	return p, nil
}

// The weighted search's two stages: weightedSteps coarse points r on [weightedRMin, 1] (or the
// plain range's start when lower), then weightedFineN points on each side of the best at a
// (weightedFineN+1)-th of the coarse spacing. Chosen against an exhaustive weighted search
// (quantize/qref) on QUALITY.md's data with log-normal column weights up to σ_ln = 2
// (docs/CALIBRATION.md).
const (
	weightedRMin  = 0.40
	weightedSteps = 16
	weightedFineN = 3
)

// grid returns float32(r_i/div) for r_i = rmin + (1-rmin)·i/(n-1), computed in float64.
func grid(rmin float64, n int, div float64) []float32 {
	g := make([]float32, n)
	for i := range g {
		r := rmin + (1-rmin)*float64(i)/float64(n-1)
		g[i] = float32(r / div)
	}
	return g
}
