//go:build goexperiment.simd && amd64

package kernels

// Direct calls for the loops handed stack buffers: a call through a loopSet field makes its
// arguments escape to the heap (one allocation per group), a switch of direct calls does not.

func callErrMulBatch(x, s, errs []float32) {
	switch lp {
	case &avx512Loops:
		errMulBatchAVX512(x, s, errs)
	case &avx2Loops:
		errMulBatchAVX2(x, s, errs)
	default:
		errMulBatch(x, s, errs)
	}
}

func callErrLanes(a *errAcc, ref, got []float32) {
	switch lp {
	case &avx512Loops:
		errLanesAVX512(a, ref, got)
	case &avx2Loops:
		errLanesAVX2(a, ref, got)
	default:
		errLanesScalar(a, ref, got)
	}
}

func callErrLanesInt4(a *errAcc, ref []float32, packed []byte, scales []float32, g int) {
	switch lp {
	case &avx512Loops:
		errLanesInt4AVX512(a, ref, packed, scales, g)
	case &avx2Loops:
		errLanesInt4AVX2(a, ref, packed, scales, g)
	default:
		errLanesInt4Scalar(a, ref, packed, scales, g)
	}
}

func callDecodeE4M3(dst []float32, codes []byte, s float32) {
	if lp == &avx512Loops {
		decodeE4M3AVX512(dst, codes, s)
		return
	}
	if lp != &scalarLoops {
		decodeE4M3AVX2(dst, codes, s)
		return
	}
	decodeE4M3Scalar(dst, codes, s)
}

// callCandidatesPos generates the positive candidates with vectors where it can: AVX-512,
// parameters from NewInt4Params, and room in dst.
func callCandidatesPos(dst []float32, a, sR float32, p *Int4Params) ([]float32, bool) {
	if lp != &avx512Loops || p.posPad == nil || cap(dst)-len(dst) < len(p.Pos)+16 {
		return dst, false
	}
	return candidatesPosAVX512(dst, a, sR, p), true
}

// callQuantBatches quantizes whole batches of groups with the batched loops where they apply
// and returns how many groups it did. AVX-512: sixteen at a time, RTN in groups of a multiple of
// 16, otherwise the batched search and pack for unsigned scales and groups of at most
// maxBatchGroup. AVX2: eight at a time, RTN in groups of any size (rtn8_avx2.go), the batched
// search and pack of SearchMSE on the same groups as AVX-512 (search8_avx2.go).
func callQuantBatches(out Int4Out, src []float32, ng int, p *Int4Params) (int, error) {
	switch {
	case noBatchSearch:
		return 0, nil
	case lp == &avx2Loops && p.Search == SearchRTN:
		return quantRTNBatchesAVX2(out, src, ng, p)
	case lp == &avx2Loops:
		if p.Signed || p.GroupSize > maxBatchGroup {
			return 0, nil
		}
		return quantBatchesAVX2(out, src, ng, p)
	case lp != &avx512Loops:
		return 0, nil
	case p.Search == SearchRTN && p.GroupSize%16 == 0:
		return quantRTNBatchesAVX512(out, src, ng, p)
	case p.Signed || p.GroupSize > maxBatchGroup:
		return 0, nil
	}
	return quantBatchesAVX512(out, src, ng, p)
}

func callErrLanesFP8(a *errAcc, ref []float32, codes []byte, scale []float32, rows, cols, bh, bw int) {
	if lp == &avx512Loops {
		errLanesFP8Asm(a, ref, codes, scale, rows, cols, bh, bw)
		return
	}
	errLanesFP8(a, ref, codes, scale, rows, cols, bh, bw)
}

// callBlockRowAbsMax is blockRowAbsMax, on AVX-512 row by row over all the blocks at once.
func callBlockRowAbsMax(amax []uint32, src []float32, cols, r0, r1 int) {
	if lp == &avx512Loops {
		blockRowAbsMaxAVX512(amax, src, cols, r0, r1)
		return
	}
	blockRowAbsMax(amax, src, cols, r0, r1)
}
