package quantize

import (
	"context"
	"fmt"
	"math"

	"pdq/kernels"
)

// QuantizeInt4Weighted is QuantizeInt4 with the scale search minimising the activation-weighted
// error Σ_j d_j·(w_j − ŵ_j)² of every group, d holding one weight per column (cols values,
// finite and non-negative: the calibration E[x_j²] of input feature j). The search runs on the
// CPU backend whatever opt.Backend says (only it implements the weighted loops). The result's
// error sums stay unweighted; WeightedSums measures the weighted ones. Like QuantizeInt4 the
// output is byte-identical for every Workers value and row ranges quantize independently.
func QuantizeInt4Weighted(ctx context.Context, w []float32, rows, cols int, opt Int4Options, d []float32) (*Int4Result, error) {
	if err := opt.Validate(cols); err != nil {
		return nil, err
	}
	if rows < 0 || len(w) != rows*cols {
		return nil, badShape("INT4 source has %d elements, want %d×%d", len(w), rows, cols)
	}
	if len(d) != cols {
		return nil, badShape("INT4 column weights: %d values for %d columns", len(d), cols)
	}
	for j, v := range d {
		if !(v >= 0) || math.IsInf(float64(v), 1) {
			return nil, fmt.Errorf("quantize: column weight %d is %v (want finite and >= 0): %w", j, v, ErrInvalidOptions)
		}
	}
	p, err := opt.params(cols)
	if err != nil {
		return nil, fmt.Errorf("quantize: %w: %w", ErrInvalidOptions, err)
	}
	g := p.GroupSize
	ng := cols / g
	res := &Int4Result{
		Rows: rows, Cols: cols, GroupSize: g,
		Packed: make([]byte, rows*cols/2),
		Scales: make([]byte, 2*rows*ng),
	}
	stats := make([]kernels.GroupStats, rows*ng)
	be := kernels.CPU{}
	err = forChunks(ctx, rows, chunkElems/cols, opt.Workers, func(r0, r1 int) error {
		out := kernels.Int4Out{
			Packed: res.Packed[r0*cols/2 : r1*cols/2],
			Scales: res.Scales[2*r0*ng : 2*r1*ng],
			Stats:  stats[r0*ng : r1*ng],
		}
		return kernelErr(be, be.QuantizeInt4Weighted(out, w[r0*cols:r1*cols], r1-r0, cols, &p, d), r0, cols)
	})
	if err != nil {
		return nil, err
	}
	for _, st := range stats {
		res.SumSq += float64(st.SumSq)
		res.SumSqErr += float64(st.Err)
		res.RTNSumSqErr += float64(st.RTNErr)
		res.Clipped += int64(st.Clipped)
	}
	return res, nil
}

// WeightedSums returns Σ d_j·ref², Σ d_j·(got−ref)² over a row-major slab of len(d) columns, in
// float64 and index order. It panics when the lengths do not fit (a programmer error).
func WeightedSums(ref, got, d []float32) (sumRef, sumErr float64) {
	if len(ref) != len(got) || len(d) == 0 || len(ref)%len(d) != 0 {
		panic(fmt.Sprintf("quantize: WeightedSums: %d reference, %d decoded, %d weights", len(ref), len(got), len(d)))
	}
	for i, r := range ref {
		w := float64(d[i%len(d)])
		e := float64(got[i]) - float64(r)
		sumRef += w * float64(r) * float64(r)
		sumErr += w * e * e
	}
	return sumRef, sumErr
}
