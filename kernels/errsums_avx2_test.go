//go:build goexperiment.simd && amd64

package kernels

import "testing"

// TestSIMDErrorSumsWithoutFMA runs the error-sum tests with the AVX2 loops' FMA form switched
// off, as on an AVX2 CPU without FMA.
func TestSIMDErrorSumsWithoutFMA(t *testing.T) {
	if !avx2FMA {
		t.Skip("the AVX2 loops run without FMA already")
	}
	avx2FMA = false
	defer func() { avx2FMA = true }()
	TestSIMDErrorSumsMax(t)
	TestErrorSumsFusedAnyInput(t)
	TestErrorSumsFused(t)
}
