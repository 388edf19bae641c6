//go:build !goexperiment.simd || !amd64

package kernels

// Without GOEXPERIMENT=simd there is only the scalar loop set; see dispatch_simd.go.

func callErrMulBatch(x, s, errs []float32) { errMulBatch(x, s, errs) }

func callErrLanes(a *errAcc, ref, got []float32) { errLanesScalar(a, ref, got) }

func callErrLanesInt4(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	errLanesInt4Scalar(a, ref, packed, scales, g)
}

func callDecodeE4M3(dst []float32, codes []byte, s float32) { decodeE4M3Scalar(dst, codes, s) }

func callCandidatesPos(dst []float32, a, sR float32, p *Int4Params) ([]float32, bool) {
	return dst, false
}

func callQuantBatches(Int4Out, []float32, int, *Int4Params) (int, error) { return 0, nil }

func callErrLanesFP8(a *errAcc, ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) {
	errLanesFP8(a, ref, codes, scale, rows, cols, bh, bw)
}

func callBlockRowAbsMax(amax []uint32, src []float32, cols, r0, r1 int) {
	blockRowAbsMax(amax, src, cols, r0, r1)
}
