//go:build !goexperiment.simd || !amd64

package kernels

// Without GOEXPERIMENT=simd the weighted search runs one group at a time; see
// int4weighted_avx512.go.

func callQuantBatchesWeighted(Int4Out, []float32, int, int, *Int4Params, []float32) (int, error) {
	return 0, nil
}
