package calib_test

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"pdq/calib"
)

// legacyGPTQ is the float64 implementation this package had before the float32 kernels (gonum's
// Cholesky and matrix product): the reference the new one is tested and benchmarked against.
// It returns the levels row-major in the original column order, or false when the dampened
// Hessian did not factorize.
func legacyGPTQ(h []float64, k int, w []float32, rows int, scales []float32, g int, actOrder bool) ([]int8, bool) {
	perm, nn, ok := legacyFactorize(h, k, actOrder)
	if !ok {
		return nil, false
	}
	const bs = calib.DefaultBlockSize
	ng := k / g
	wk := make([]float64, rows*k)
	ek := make([]float64, rows*bs)
	lv := make([]int8, rows*k)
	for r := range rows {
		for i, c := range perm {
			wk[r*k+i] = float64(w[r*k+c])
		}
	}
	for b0 := 0; b0 < k; b0 += bs {
		b1 := min(k, b0+bs)
		nb := b1 - b0
		for r := range rows {
			row := wk[r*k : (r+1)*k]
			for i := b0; i < b1; i++ {
				c := perm[i]
				s := float64(scales[r*ng+c/g])
				var q float64
				if s != 0 {
					q = math.RoundToEven(min(max(row[i]/s, -8), 7))
				}
				lv[r*k+c] = int8(q)
				e := float64(w[r*k+c]) - q*s
				ek[r*nb+(i-b0)] = e
				ni := nn[i*k : (i+1)*k]
				for j := i + 1; j < b1; j++ {
					row[j] += e * ni[j]
				}
			}
		}
		if b1 < k {
			a := blas64.General{Rows: rows, Cols: nb, Stride: nb, Data: ek[:rows*nb]}
			b := blas64.General{Rows: nb, Cols: k - b1, Stride: k, Data: nn[b0*k+b1:]}
			c := blas64.General{Rows: rows, Cols: k - b1, Stride: k, Data: wk[b1:]}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 1, c)
		}
	}
	return lv, true
}

// legacyFactorize: the processing order and N from gonum's float64 Cholesky of the reversed,
// dampened matrix (default dampening, no retries).
func legacyFactorize(h []float64, k int, actOrder bool) ([]int, []float64, bool) {
	var mean float64
	for i := range k {
		mean += h[i*k+i]
	}
	mean /= float64(k)
	perm := make([]int, k)
	for i := range perm {
		perm[i] = i
	}
	if actOrder {
		sort.SliceStable(perm, func(a, b int) bool { return h[perm[a]*k+perm[a]] > h[perm[b]*k+perm[b]] })
	}
	rev := make([]float64, k*k)
	for i := range k {
		pi := perm[k-1-i]
		for j := range k {
			rev[i*k+j] = h[pi*k+perm[k-1-j]]
		}
		rev[i*k+i] += calib.DefaultDamp * mean
	}
	var ch mat.Cholesky
	if !ch.Factorize(mat.NewSymDense(k, rev)) {
		return nil, nil, false
	}
	var l mat.TriDense
	ch.LTo(&l)
	raw := l.RawTriangular()
	lt := func(i, j int) float64 { return raw.Data[(k-1-i)*raw.Stride+(k-1-j)] }
	n := make([]float64, k*k)
	for i := range k {
		n[i*k+i] = 1
		for j := i + 1; j < k; j++ {
			n[i*k+j] = lt(i, j) / lt(j, j)
		}
	}
	return perm, n, true
}
