package calib

import (
	"context"
	"fmt"

	"pdq/quantize"
	"pdq/safetensors"
)

// QuantizeGPTQ quantizes w (rows×cols) with GPTQ and static groups: the scales come from the
// weighted search with column weights d (quantize.QuantizeInt4Weighted), so the output is plain
// group-wise INT4 in the pack-quantized layout, then f chooses the levels. The result's SumSqErr
// is the plain error of the GPTQ levels; RTNSumSqErr stays the reference rule's.
func QuantizeGPTQ(ctx context.Context, w []float32, rows, cols int, opt quantize.Int4Options, d []float32, f *Factor) (*quantize.Int4Result, error) {
	if f.K != cols {
		return nil, fmt.Errorf("calib: GPTQ factor for %d columns, weight has %d: %w", f.K, cols, ErrMismatch)
	}
	res, err := quantize.QuantizeInt4Weighted(ctx, w, rows, cols, opt, d)
	if err != nil {
		return nil, err
	}
	g := res.GroupSize
	scales := make([]float32, len(res.Scales)/2)
	safetensors.DecodeBF16(scales, res.Scales)
	clipped, err := f.Quantize(ctx, res.Packed, w, rows, scales, g)
	if err != nil {
		return nil, err
	}
	got := make([]float32, len(w))
	if err := quantize.DequantizeInt4(got, res.Packed, res.Scales, safetensors.BF16, rows, cols, g); err != nil {
		return nil, err
	}
	var m quantize.Metrics
	m.Add(w, got, 0)
	res.SumSq, res.SumSqErr, res.Clipped = m.SumSqRef, m.SumSqErr, clipped
	return res, nil
}
