//go:build !(goexperiment.simd && amd64)

package kernels

// simdBuild reports that this test binary has the SIMD loops.
const simdBuild = false
