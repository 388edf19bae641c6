package quantize_test

import (
	"context"
	"fmt"
	"math"

	"pdq/quantize"
	"pdq/safetensors"
)

// Quantize a 4x64 weight to group-wise INT4 (groups of 32, MSE scale search), dequantize the
// bytes it produced, and measure the error of what was written.
func ExampleQuantizeInt4() {
	const rows, cols = 4, 64
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	q, err := quantize.QuantizeInt4(context.Background(), w, rows, cols, quantize.Int4Options{GroupSize: 32, Method: quantize.MethodMSE})
	if err != nil {
		panic(err)
	}
	back := make([]float32, len(w))
	if err := quantize.DequantizeInt4(back, q.Packed, q.Scales, safetensors.BF16, rows, cols, q.GroupSize); err != nil {
		panic(err)
	}
	var m quantize.Metrics
	m.Add(w, back, 0)
	fmt.Printf("%d bytes of levels, %d bytes of scales, SQNR above 18 dB: %v\n", len(q.Packed), len(q.Scales), m.SQNR() > 18)
	// Output: 128 bytes of levels, 16 bytes of scales, SQNR above 18 dB: true
}
