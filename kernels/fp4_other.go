//go:build !goexperiment.simd || !amd64

package kernels

// Without GOEXPERIMENT=simd the FP4 groups run the scalar loops; see fp4_simd.go.

func callFP4Groups(out FP4Out, src []float32, k0, k1, gs int, cs []fp4Cand) {
	fp4GroupsScalar(out, src, k0, k1, gs, cs)
}

func callExpandFP4(dst []float32, p []byte, scales []float32, i0, g int) {
	expandFP4Range(dst, p, scales, i0, g)
}

func callFP4Batches(out FP4Out, src []float32, ng, gs int, g float32, search Search) int { return 0 }

func callErrLanesFP4(a *errAcc, ref []float32, packed []byte, scales []float32, g int) bool {
	return false
}
