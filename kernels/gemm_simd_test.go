//go:build goexperiment.simd && amd64

package kernels

import (
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// gemmTileCase fills packed panels of kc steps and a C tile (row stride ldc) of the given kind:
// 0 normal values; 1 values with specials mixed in (±0, ±Inf, subnormals, float32 extremes that
// overflow, and so NaNs made by the arithmetic: Inf·0, Inf−Inf); 2 values of few significant
// bits over a wide range of exponents (sums on float32 midpoints and below the normal range);
// 3 normal values and NaNs, all of the default NaN's bits (which NaN comes out when several
// operands are NaNs of different payloads is not specified: see gemm.go).
func gemmTileCase(r *rand.Rand, kind, kc, ldc int) (ap, bp, c []float32) {
	ap, bp = make([]float32, kc*gemmMR), make([]float32, kc*gemmNR)
	c = make([]float32, (gemmMR-1)*ldc+gemmNR+r.IntN(3))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(1), math.Float32frombits(0x807fffff), math.MaxFloat32, -math.MaxFloat32}
	fill := func(x []float32) {
		for i := range x {
			switch v := float32(r.NormFloat64()); {
			case kind == 1 && r.IntN(8) == 0:
				x[i] = specials[r.IntN(len(specials))]
			case kind == 3 && r.IntN(8) == 0:
				x[i] = math.Float32frombits(0xffc00000)
			case kind == 2:
				// few significant bits, exponents spread down to subnormal sums
				x[i] = float32(r.IntN(1<<12)-1<<11) * float32(math.Ldexp(1, r.IntN(40)-80))
			default:
				x[i] = v
			}
		}
	}
	fill(ap)
	fill(bp)
	fill(c)
	return ap, bp, c
}

// TestSIMDGemmTileMatchesScalar: each vector form of the micro-kernel this CPU runs (the AVX2
// and AVX-512 Go forms and the AVX-512 assembly) gives gemmTileScalar's bits on every element
// of the tile, and leaves C outside the tile alone, for kc from 1 (MatMulAddF32 never passes 0) to past GemmKC, row strides
// wider than the tile and special values.
func TestSIMDGemmTileMatchesScalar(t *testing.T) {
	type tileFunc struct {
		name string
		f    func(kc int, ap, bp, c []float32, ldc int)
	}
	var forms []tileFunc
	if archsimd.X86.AVX2() && archsimd.X86.FMA() {
		forms = append(forms, tileFunc{"avx2", gemmTileAVX2})
	}
	if archsimd.X86.AVX512() {
		forms = append(forms, tileFunc{"avx512-go", gemmTileAVX512}, tileFunc{"avx512-asm", gemmTileAVX512A})
	}
	if len(forms) == 0 {
		t.Skip("no vector micro-kernel runs on this CPU")
	}
	r := rand.New(rand.NewPCG(28, 6144))
	for _, kc := range []int{1, 2, 7, 128, 300} {
		for _, ldc := range []int{gemmNR, gemmNR + 5, 100} {
			for kind := range 4 {
				ap, bp, c0 := gemmTileCase(r, kind, kc, ldc)
				want := append([]float32(nil), c0...)
				gemmTileScalar(kc, ap, bp, want, ldc)
				for _, form := range forms {
					got := append([]float32(nil), c0...)
					form.f(kc, ap, bp, got, ldc)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s kc=%d ldc=%d kind %d: C[%d] = %g (%#x), scalar %g (%#x)",
								form.name, kc, ldc, kind, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	}
}

// BenchmarkGemmTile: one micro-kernel call of GemmKC steps on panels in the first-level cache,
// for each vector form this CPU runs (GFMA per second of the tile alone, without packing or the
// traffic of C that MatMulAddF32 adds).
func BenchmarkGemmTile(b *testing.B) {
	forms := map[string]func(kc int, ap, bp, c []float32, ldc int){}
	if archsimd.X86.AVX2() && archsimd.X86.FMA() {
		forms["avx2"] = gemmTileAVX2
	}
	if archsimd.X86.AVX512() {
		forms["avx512-go"], forms["avx512-asm"] = gemmTileAVX512, gemmTileAVX512A
	}
	r := rand.New(rand.NewPCG(1, 1))
	ap, bp, c := gemmTileCase(r, 0, GemmKC, gemmNR)
	for _, name := range []string{"avx2", "avx512-go", "avx512-asm"} {
		f, ok := forms[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f(GemmKC, ap, bp, c, gemmNR)
			}
			b.ReportMetric(float64(GemmKC*gemmMR*gemmNR)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFMA/s")
		})
	}
}
