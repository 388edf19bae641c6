package calib

import "context"

// Device runs GPTQ's two heavy steps on an accelerator with the CPU's bytes (the CUDA
// backend implements it). Set GPTQOptions.Device to use it.
type Device interface {
	// FactorUnitUpper does what choleskyLower and reverseToUnitUpper do to a (K×K): on
	// success it writes N into n and returns true; false when a is not numerically positive
	// definite or N not finite. a is not modified.
	FactorUnitUpper(ctx context.Context, n, a []float32, k int) (bool, error)
	// QuantizeGPTQ does what Factor.Quantize does with the factor's Perm and N and column
	// blocks of bs.
	QuantizeGPTQ(ctx context.Context, packed []byte, w []float32, rows, k int, perm []int, n, scales []float32, g, bs int) (int64, error)
}

// factorUnitUpper factorizes the prepared matrix a into N in place, on dev when it is set.
func factorUnitUpper(ctx context.Context, dev Device, a []float32, k int) (bool, error) {
	if dev == nil {
		ok, err := choleskyLower(ctx, a, k)
		return ok && err == nil && reverseToUnitUpper(a, k), err
	}
	n := make([]float32, len(a))
	ok, err := dev.FactorUnitUpper(ctx, n, a, k)
	if ok && err == nil {
		copy(a, n)
	}
	return ok, err
}
