package kernels

import (
	"fmt"
	"os"
	"strings"
)

// loopSet holds one implementation of the inner loops of the CPU backend. The scalar set (the
// functions of int4loops.go, int4weighted.go, errsums.go, dequant.go and gemm.go) is the
// specification; a SIMD set must return the same bits for every input, which the tests and fuzz
// targets check set against set.
type loopSet struct {
	name       string
	absMaxBits func(x []float32) uint32
	sumSq      func(x []float32) float32
	// errMulBatch sets errs[i] = errMul(x, s[i], 1/s[i]) for every candidate scale.
	errMulBatch func(x, s, errs []float32)
	errDiv      func(x []float32, s float32) float32
	errSumsMul  func(x []float32, s, inv float32) (e, xq, qq float32)
	errSumsDiv  func(x []float32, s float32) (e, xq, qq float32)
	packDiv     func(dst []byte, x []float32, s float32) GroupStats
	packMul     func(dst []byte, x []float32, s, inv float32) GroupStats
	wSums       func(x, w []float32, s, inv float32, div bool) (e, xq, qq float32)
	// errLanes adds the error sums of got against ref to the eight lane accumulators.
	errLanes func(acc *errAcc, ref, got []float32)
	// errLanesInt4 is errLanes with got = (nibble-8)·scale of packed levels, groups of g.
	errLanesInt4 func(acc *errAcc, ref []float32, packed []byte, scales []float32, g int)
	// decodeE4M3 writes e4m3(codes[i])·s into dst (len(dst) == len(codes)).
	decodeE4M3 func(dst []float32, codes []byte, s float32)
	// encodeE4M3 writes e4m3(src[i]/s) into codes (len(codes) == len(src)).
	encodeE4M3 func(codes []byte, src []float32, s float32)
	// blockAbsMax and encodeE4M3Row are the two passes of the FP8 block quantizer
	// (blockAbsMax and encodeE4M3Row of fp8.go).
	blockAbsMax   func(src []float32, cols, r0, r1, c0, c1 int) uint32
	encodeE4M3Row func(codes []byte, row []float32, sc []float32)
	// gemmTile adds a gemmMR×gemmNR tile of packed panels to C (gemmTileScalar).
	gemmTile func(kc int, ap, bp, c []float32, ldc int)
	// axpy sets y[i] = fma32(a, x[i], y[i]) (len(x) == len(y)).
	axpy func(y, x []float32, a float32)
}

var scalarLoops = loopSet{
	name:          "scalar",
	absMaxBits:    absMaxBits,
	sumSq:         sumSq,
	errMulBatch:   errMulBatch,
	errDiv:        errDiv,
	errSumsMul:    errSumsMul,
	errSumsDiv:    errSumsDiv,
	packDiv:       packDiv,
	packMul:       packMul,
	wSums:         wSums,
	errLanes:      errLanesScalar,
	errLanesInt4:  errLanesInt4Scalar,
	decodeE4M3:    decodeE4M3Scalar,
	encodeE4M3:    encodeE4M3Scalar,
	blockAbsMax:   blockAbsMax,
	encodeE4M3Row: encodeE4M3Row,
	gemmTile:      gemmTileScalar,
	axpy:          axpyScalar,
}

// loopSets lists the implementations this binary and CPU can run, the scalar one first and the
// fastest last; simd.go files add theirs in init.
var loopSets = []*loopSet{&scalarLoops}

// lp is the loop set in use: the fastest, unless PDQ_NOSIMD is set (to anything but "" or "0").
var lp = &scalarLoops

func init() {
	if v := os.Getenv("PDQ_NOSIMD"); v != "" && v != "0" {
		return
	}
	lp = loopSets[len(loopSets)-1]
}

// addLoops registers a SIMD loop set; called from init by the files built with GOEXPERIMENT=simd.
func addLoops(s *loopSet) { loopSets = append(loopSets, s) }

// noBatchSearch switches the sixteen-group search and pack off (per-group loops only), for the
// tests and benchmarks that compare the two; like SetSIMD it must not change while kernels run.
var noBatchSearch bool

// SIMD returns the name of the inner loops the CPU backend uses: "scalar", "avx2" or "avx512".
func SIMD() string { return lp.name }

// SIMDLevels returns the loop sets this binary can use on this CPU, "scalar" first.
func SIMDLevels() []string {
	names := make([]string, len(loopSets))
	for i, s := range loopSets {
		names[i] = s.name
	}
	return names
}

// SetSIMD selects the inner loops by name (one of SIMDLevels) and returns the previous name.
// Every set gives the same bytes; this is for tests, benchmarks and diagnosis. It must not be
// called while kernels run.
func SetSIMD(name string) (string, error) {
	prev := lp.name
	for _, s := range loopSets {
		if s.name == name {
			lp = s
			return prev, nil
		}
	}
	return prev, fmt.Errorf("kernels: SIMD level %q not available here (have %s)", name, strings.Join(SIMDLevels(), ", "))
}

// FirstNonFinite returns the index of the first NaN or ±Inf in x, or -1. It scans 4096
// elements at a time with the absolute-maximum loop (a non-finite value has the largest bit
// pattern) and looks for the element only inside a block that has one.
func FirstNonFinite(x []float32) int {
	const block = 4096
	for b := 0; b < len(x); b += block {
		blk := x[b:min(len(x), b+block)]
		if lp.absMaxBits(blk) >= 0x7f800000 {
			return b + firstNonFinite(blk)
		}
	}
	return -1
}
