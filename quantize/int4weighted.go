package quantize

import (
	"context"
	"fmt"
	"math"

	"pdq/kernels"
)

// WeightedBackend is a backend with kernels.CPU.QuantizeInt4Weighted's bytes (the CUDA
// backend); QuantizeInt4Weighted uses it when opt.Backend is one, else the CPU.
type WeightedBackend interface {
	QuantizeInt4Weighted(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params, d []float32) error
}

// QuantizeInt4Weighted is QuantizeInt4 with the scale search minimising the activation-weighted
// error Σ_j d_j·(w_j − ŵ_j)² of every group, d holding one weight per column (cols values,
// finite and non-negative: the calibration E[x_j²] of input feature j). The search runs on
// opt.Backend when it is a WeightedBackend (same bytes), else on the CPU. The result's
// error sums stay unweighted; WeightedSums measures the weighted ones. Like QuantizeInt4 the
// output is byte-identical for every Workers value and row ranges quantize independently.
func QuantizeInt4Weighted(ctx context.Context, w []float32, rows, cols int, opt Int4Options, d []float32) (*Int4Result, error) {
	checkWeights := func() error {
		if len(d) != cols {
			return badShape("INT4 column weights: %d values for %d columns", len(d), cols)
		}
		for j, v := range d {
			if !(v >= 0) || math.IsInf(float64(v), 1) {
				return fmt.Errorf("quantize: column weight %d is %v (want finite and >= 0): %w", j, v, ErrInvalidOptions)
			}
		}
		return nil
	}
	var be kernels.Backend = kernels.CPU{}
	weighted := kernels.CPU{}.QuantizeInt4Weighted
	if wb, ok := opt.Backend.(WeightedBackend); ok {
		be, weighted = opt.Backend, wb.QuantizeInt4Weighted
	}
	res := new(Int4Result)
	err := quantizeInt4Rows(ctx, res, w, rows, cols, opt, checkWeights, be, chunkElems/max(cols, 1),
		func(out kernels.Int4Out, src []float32, n int, p *kernels.Int4Params) error {
			return weighted(out, src, n, cols, p, d)
		})
	if err != nil {
		return nil, err
	}
	res.stats = nil
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
