package kernels

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaExact is a·b + c computed exactly and rounded once to float32 (nearest, ties to even).
func fmaExact(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// fmaCases returns triples that stress the rounding: random magnitudes, products cancelling c,
// sums landing on float32 midpoints with a tiny remainder, subnormals and zeros.
func fmaCases(r *rand.Rand, n int) [][3]float32 {
	out := make([][3]float32, 0, n)
	for len(out) < n {
		a := float32(r.NormFloat64() * math.Exp(r.NormFloat64()*8))
		b := float32(r.NormFloat64() * math.Exp(r.NormFloat64()*8))
		var c float32
		switch r.IntN(5) {
		case 0:
			c = float32(r.NormFloat64())
		case 1:
			c = -a * b // cancellation
		case 2:
			// a·b = midpoint of two float32 values plus a tiny c
			m := float32(1 + float64(r.IntN(1<<20))/(1<<20))
			a, b = m, 1+float32(math.Ldexp(1, -12))
			c = float32(math.Ldexp(r.NormFloat64(), -60))
		case 3:
			c = float32(math.Ldexp(r.NormFloat64(), -140)) // subnormal
		case 4:
			a, c = float32(math.Ldexp(1, -75)), float32(math.Ldexp(r.NormFloat64(), -149))
		}
		out = append(out, [3]float32{a, b, c})
	}
	return out
}

// TestFMA32Exact: fma32 rounds a·b + c once, as an exact computation does.
func TestFMA32Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range fmaCases(r, 200000) {
		got, want := fma32(c[0], c[1], c[2]), fmaExact(c[0], c[1], c[2])
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", c[0], c[1], c[2], got, want)
		}
	}
}

// TestSIMDAxpyMatchesScalar: every loop set's axpy gives the scalar bits (the hardware FMA
// against fma32), on the FMA stress cases and every tail length.
func TestSIMDAxpyMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cs := fmaCases(r, 4099)
	x, y0 := make([]float32, len(cs)), make([]float32, len(cs))
	var a float32 = 1
	for i, c := range cs {
		x[i], y0[i] = c[0]*c[1], c[2] // a = 1: y = fma(1, a·b rounded, c)
	}
	want := append([]float32(nil), y0...)
	axpyScalar(want, x, a)
	withSIMD(t, func(t *testing.T, set *loopSet) {
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 33, len(y0)} {
			got := append([]float32(nil), y0[:n]...)
			AxpyF32(got, x, a)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d: y[%d] = %g, want %g", n, i, got[i], want[i])
				}
			}
		}
		for i := 0; i < 1000; i++ {
			c := cs[i]
			y := []float32{c[2]}
			AxpyF32(y, []float32{c[1]}, c[0])
			yv := make([]float32, 16)
			xv := make([]float32, 16)
			for j := range yv {
				yv[j], xv[j] = c[2], c[1]
			}
			AxpyF32(yv, xv, c[0])
			if w := fma32(c[0], c[1], c[2]); math.Float32bits(yv[3]) != math.Float32bits(w) || math.Float32bits(y[0]) != math.Float32bits(w) {
				t.Fatalf("fma(%g, %g, %g): vector %g, scalar %g, want %g", c[0], c[1], c[2], yv[3], y[0], w)
			}
		}
	})
}

func randMat(r *rand.Rand, rows, cols, stride int) MatF32 {
	m := MatF32{Data: make([]float32, (rows-1)*stride+cols), Rows: rows, Cols: cols, Stride: stride}
	for i := range m.Data {
		m.Data[i] = float32(r.NormFloat64())
	}
	return m
}

// TestSIMDGemmMatchesScalar: the product has the scalar bits on every loop set, for shapes with
// edge tiles, strides, both signs and the lower-triangle form; and it is the product (to float32
// rounding, against float64 sums).
func TestSIMDGemmMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ m, n, k int }{{1, 1, 1}, {4, 32, 128}, {5, 33, 129}, {130, 515, 300}, {67, 67, 40}} {
		a := randMat(r, sh.m, sh.k, sh.k+3)
		b := randMat(r, sh.k, sh.n, sh.n+1)
		c0 := randMat(r, sh.m, sh.n, sh.n+5)
		for _, mode := range []struct{ sub, lower bool }{{false, false}, {true, false}, {true, true}} {
			run := func() MatF32 {
				c := c0
				c.Data = append([]float32(nil), c0.Data...)
				if err := MatMulAddF32(c, a, b, mode.sub, mode.lower); err != nil {
					t.Fatal(err)
				}
				return c
			}
			prev, _ := SetSIMD("scalar")
			want := run()
			SetSIMD(prev)
			for i := range sh.m {
				for j := range sh.n {
					if mode.lower && j > i {
						continue
					}
					s := float64(c0.Data[i*c0.Stride+j])
					var abs float64
					for p := range sh.k {
						v := float64(a.Data[i*a.Stride+p]) * float64(b.Data[p*b.Stride+j])
						if mode.sub {
							v = -v
						}
						s += v
						abs += math.Abs(v)
					}
					if d := math.Abs(float64(want.Data[i*want.Stride+j]) - s); d > 1e-6*(abs+1)*float64(sh.k) {
						t.Fatalf("%v %+v: C[%d][%d] = %g, want %g", sh, mode, i, j, want.Data[i*want.Stride+j], s)
					}
				}
			}
			withSIMD(t, func(t *testing.T, set *loopSet) {
				got := run()
				for i := range sh.m {
					for j := range sh.n {
						if mode.lower && j > i {
							continue
						}
						g, w := got.Data[i*got.Stride+j], want.Data[i*want.Stride+j]
						if math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%v %+v: C[%d][%d] = %g, scalar %g", sh, mode, i, j, g, w)
						}
					}
				}
			})
		}
	}
	bad := MatF32{Data: make([]float32, 3), Rows: 2, Cols: 2, Stride: 2}
	if err := MatMulAddF32(bad, bad, bad, false, false); !errors.Is(err, ErrShape) {
		t.Errorf("short matrix: %v, want ErrShape", err)
	}
}

// BenchmarkGemmF32: C (256×6144) += A (256×128)·B (128×6144), the shape of one GPTQ lazy block
// update, on every loop set.
func BenchmarkGemmF32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	m, n, k := 256, 6144, 128
	a, bm, c := randMat(r, m, k, k), randMat(r, k, n, n), randMat(r, m, n, n)
	for _, set := range loopSets {
		b.Run(set.name, func(b *testing.B) {
			prev, _ := SetSIMD(set.name)
			defer SetSIMD(prev)
			for b.Loop() {
				if err := MatMulAddF32(c, a, bm, false, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFMA/s")
		})
	}
}
