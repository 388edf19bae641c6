// Package qref holds what the quantization quality is measured against: synthetic weights made
// to QUALITY.md's definition, a plain float64 exhaustive scale search, and QUALITY.md's
// reference figures. It is deliberately simple and slow; nothing here is used to write
// checkpoints.
package qref

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"pdq/safetensors"
)

// Dist names a synthetic weight distribution.
type Dist string

const (
	// Gauss is the normal distribution.
	Gauss Dist = "gauss"
	// T4 is Student's t with ν = 4 (heavy tails, like real q/k projections).
	T4 Dist = "t4"
)

// Synthetic returns rows×cols weights of distribution d with standard deviation sigma, rounded
// to F16, from a fixed-seed generator (PCG seeded with seed).
func Synthetic(d Dist, rows, cols int, sigma float64, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	w := make([]float32, rows*cols)
	for i := range w {
		v := rng.NormFloat64()
		if d == T4 {
			// t_4 = z / sqrt(χ²_4 / 4); its variance is 2.
			var c float64
			for range 4 {
				z := rng.NormFloat64()
				c += z * z
			}
			v /= math.Sqrt(c/4) * math.Sqrt2
		}
		w[i] = safetensors.F16ToFloat32(safetensors.Float32ToF16(float32(v * sigma)))
	}
	return w
}

// Search describes the reference scale search: candidates bf16(r·absmax/7) for Points values of r
// evenly spaced on [RMin, RMax], plus the RTN scale bf16(absmax/7.5); when Signed also the
// negated candidates and ±bf16(r·absmax/8); then up to Refine least-squares refinements
// s ← bf16(Σx·q/Σq²), each kept only if the error drops. Errors are exact float64 sums.
type Search struct {
	RMin, RMax float64
	Points     int
	Refine     int
	Signed     bool
}

// Exhaustive returns the 400-point search over [rmin, 1] with three refinements.
func Exhaustive(rmin float64, signed bool) Search {
	return Search{RMin: rmin, RMax: 1, Points: 400, Refine: 3, Signed: signed}
}

// SQNR returns the SQNR in dB of the search over groups of g elements of w.
func (s Search) SQNR(w []float32, g int) float64 {
	sumSq, sumErr := s.Sums(w, g)
	return 10 * math.Log10(sumSq/sumErr)
}

// Sums returns Σx² and the total squared error of the search over groups of g elements of w
// (len(w) a multiple of g), computed with GOMAXPROCS goroutines.
func (s Search) Sums(w []float32, g int) (sumSq, sumErr float64) {
	return s.WeightedSums(w, nil, g)
}

// WeightedSums is Sums in the activation-weighted metric: w is row-major with len(d) columns,
// column j's terms count d_j times (Σd·x² and Σd·(x−q·s)²), and the search minimises the
// weighted error of every group (the refinement s ← bf16(Σd·x·q/Σd·q²)). With d nil every
// weight is 1: Sums.
func (s Search) WeightedSums(w, d []float32, g int) (sumSq, sumErr float64) {
	ng := len(w) / g
	workers := runtime.GOMAXPROCS(0)
	errs := make([]float64, ng)
	sums := make([]float64, ng)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Go(func() {
			var buf []float32
			for i := k; i < ng; i += workers {
				x := w[i*g : (i+1)*g]
				var dg []float32
				if d != nil {
					c0 := (i * g) % len(d)
					dg = d[c0 : c0+g]
				}
				errs[i], buf = s.group(x, dg, buf)
				for j, v := range x {
					sums[i] += weight(dg, j) * float64(v) * float64(v)
				}
			}
		})
	}
	wg.Wait()
	for i := range errs {
		sumSq += sums[i]
		sumErr += errs[i]
	}
	return sumSq, sumErr
}

// weight returns d[j], or 1 when d is nil.
func weight(d []float32, j int) float64 {
	if d == nil {
		return 1
	}
	return float64(d[j])
}

// Err returns the squared error of one group quantized with scale s (levels rne(clamp(x/s))).
func Err(x []float32, s float32) float64 { return WeightedErr(x, nil, s) }

// WeightedErr is Err with element j's term weighted by d[j] (d nil: Err).
func WeightedErr(x, d []float32, s float32) float64 {
	var e float64
	for j, v := range x {
		dd := float64(v)
		if s != 0 {
			q := math.RoundToEven(min(max(float64(v)/float64(s), -8), 7))
			dd -= q * float64(s)
		}
		e += weight(d, j) * dd * dd
	}
	return e
}

func (s Search) group(x, d []float32, cands []float32) (float64, []float32) {
	var a float32
	for _, v := range x {
		a = max(a, float32(math.Abs(float64(v))))
	}
	if a == 0 {
		return 0, cands
	}
	cands = append(cands[:0], safetensors.RoundBF16(a/7.5))
	for i := range s.Points {
		r := s.RMin + (s.RMax-s.RMin)*float64(i)/float64(max(1, s.Points-1))
		c7 := safetensors.RoundBF16(float32(r * float64(a) / 7))
		cands = append(cands, c7)
		if s.Signed {
			c8 := safetensors.RoundBF16(float32(r * float64(a) / 8))
			cands = append(cands, -c7, c8, -c8)
		}
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	best, bestE := float32(0), math.Inf(1)
	for _, c := range cands {
		if c == 0 {
			continue
		}
		if e := WeightedErr(x, d, c); e < bestE {
			best, bestE = c, e
		}
	}
	for range s.Refine {
		var xq, qq float64
		for j, v := range x {
			q := math.RoundToEven(min(max(float64(v)/float64(best), -8), 7))
			xq += weight(d, j) * float64(v) * q
			qq += weight(d, j) * q * q
		}
		if qq == 0 {
			break
		}
		c := safetensors.RoundBF16(float32(xq / qq))
		if c == 0 || (!s.Signed && c < 0) {
			break
		}
		e := WeightedErr(x, d, c)
		if !(e < bestE) {
			break
		}
		best, bestE = c, e
	}
	return bestE, cands
}

// Column names the four columns of QUALITY.md's reference table.
type Column struct {
	Dist  Dist
	Group int
}

// Columns lists the reference table's columns in order.
var Columns = []Column{{Gauss, 32}, {Gauss, 128}, {T4, 32}, {T4, 128}}

// Reference figures of QUALITY.md (dB, per column of Columns; NaN where the table has none).
var (
	TableRTN    = [4]float64{20.47, 19.12, 17.82, 14.78}
	TableBest   = [4]float64{21.31, 19.93, 18.53, 15.59}
	TableSigned = [4]float64{21.84, 20.31, 19.09, 16.05}
	TableFP8    = [4]float64{31.55, math.NaN(), 31.62, math.NaN()}
)

// Data generation parameters of QUALITY.md.
const (
	Rows  = 4096
	Cols  = 4096
	Sigma = 0.02
	Seed  = 20261101
)

// RMin returns the search range start for group size g: QUALITY.md's 0.8 for g32 and 0.5 for
// g128; 0.65 for g64 and 0.2 for larger groups (per channel) are this package's choice.
func RMin(g int) float64 {
	switch {
	case g <= 32:
		return 0.8
	case g <= 64:
		return 0.65
	case g <= 128:
		return 0.5
	}
	return 0.2
}
