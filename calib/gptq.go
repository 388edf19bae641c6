package calib

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// GPTQ defaults.
const (
	DefaultDamp      = 0.01 // fraction of the mean Hessian diagonal added to the diagonal
	DefaultBlockSize = 128  // columns per lazy-update block
	DefaultRetries   = 3    // Cholesky retries, each with ten times the dampening
)

// ErrIllConditioned: the dampened Hessian could not be factorized even after the retries.
var ErrIllConditioned = errors.New("Hessian not positive definite after dampening")

// ErrNoSignal: the Hessian's diagonal is zero (the module saw no tokens).
var ErrNoSignal = errors.New("Hessian is zero")

// GPTQOptions configure Factorize and Factor.Quantize.
type GPTQOptions struct {
	Damp      float64 // fraction of the mean diagonal added to the diagonal; 0 means DefaultDamp
	BlockSize int     // columns per block; 0 means DefaultBlockSize
	ActOrder  bool    // process columns by decreasing Hessian diagonal
	Retries   int     // Cholesky retries with ten times the dampening; 0 means DefaultRetries, < 0 none
}

func (o GPTQOptions) withDefaults() GPTQOptions {
	if o.Damp <= 0 {
		o.Damp = DefaultDamp
	}
	if o.BlockSize <= 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	return o
}

// Factor is what GPTQ needs of a module's Hessian: the processing order and the unit upper
// triangular N of the decomposition PᵀHP + λI = N·S²·Nᵀ (S diagonal). Modules reading the same
// input (gate and up of one expert) can share one Factor.
//
// GPTQ's update (quantize column i, spread its error over the later columns through the
// Cholesky factor U of the inverse Hessian, UᵀU = H⁻¹) is, in exact arithmetic, the same as
// w'_k = w_k + Σ_{i<k} (w_i − q_i·s_i)·N_ik with the errors of the original weights (the LDL form
// of GPTQ): N = (D⁻¹U)⁻¹ for D = diag(U). N comes from one Cholesky factorization of the
// reversed matrix, with no inverse to compute, which halves the cost of the factorization.
type Factor struct {
	K    int
	Perm []int     // Perm[i] is the column processed i-th
	N    []float64 // K×K, row-major, unit upper triangular, in processing order
	Damp float64   // the dampening finally used, as a fraction of the mean diagonal
	// Tries is the number of factorizations attempted (1 when the first succeeded).
	Tries int
	block int
}

// Factorize prepares GPTQ for the K×K Hessian h (row-major, symmetric, float64). Columns whose
// diagonal is zero (inputs never active) get only the dampening, so their errors are not
// propagated. When the Cholesky factorization fails, it is retried with ten times the
// dampening, up to o.Retries times; then ErrIllConditioned.
func Factorize(h []float64, k int, o GPTQOptions) (*Factor, error) {
	o = o.withDefaults()
	if k <= 0 || len(h) != k*k {
		return nil, fmt.Errorf("calib: GPTQ: Hessian of %d values for K=%d", len(h), k)
	}
	var mean float64
	for i := range k {
		mean += h[i*k+i]
	}
	mean /= float64(k)
	if !(mean > 0) || math.IsInf(mean, 0) {
		return nil, fmt.Errorf("calib: GPTQ: mean diagonal %g: %w", mean, ErrNoSignal)
	}
	perm := make([]int, k)
	for i := range perm {
		perm[i] = i
	}
	if o.ActOrder {
		sort.SliceStable(perm, func(a, b int) bool { return h[perm[a]*k+perm[a]] > h[perm[b]*k+perm[b]] })
	}
	// Cholesky of the reversed permuted matrix: R·PᵀHP·R = L·Lᵀ gives PᵀHP = T·Tᵀ with
	// T = R·L·R upper triangular (R reverses the order); N = T·diag(T)⁻¹.
	rev := make([]float64, k*k)
	damp := o.Damp
	f := &Factor{K: k, Perm: perm, block: o.BlockSize}
	for try := 0; try <= max(o.Retries, 0); try++ {
		f.Tries = try + 1
		lambda := damp * mean
		for i := range k {
			pi := perm[k-1-i]
			for j := range k {
				rev[i*k+j] = h[pi*k+perm[k-1-j]]
			}
			rev[i*k+i] += lambda
		}
		n, ok := unitUpperFactor(rev, k)
		if ok {
			f.N, f.Damp = n, damp
			return f, nil
		}
		damp *= 10
	}
	return nil, fmt.Errorf("calib: GPTQ: dampening up to %g of the mean diagonal: %w", damp/10, ErrIllConditioned)
}

// unitUpperFactor factorizes the reversed matrix a and returns N in processing order, or false
// when a is not numerically positive definite.
func unitUpperFactor(a []float64, k int) ([]float64, bool) {
	var ch mat.Cholesky
	if !ch.Factorize(mat.NewSymDense(k, a)) {
		return nil, false
	}
	var l mat.TriDense
	ch.LTo(&l)
	raw := l.RawTriangular()
	lt := func(i, j int) float64 { return raw.Data[(k-1-i)*raw.Stride+(k-1-j)] } // T[i][j], j >= i
	diag := make([]float64, k)
	for j := range k {
		diag[j] = lt(j, j)
		if !(diag[j] > 0) || math.IsInf(diag[j], 0) {
			return nil, false
		}
	}
	n := make([]float64, k*k)
	for i := range k {
		n[i*k+i] = 1
		for j := i + 1; j < k; j++ {
			v := lt(i, j) / diag[j]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, false
			}
			n[i*k+j] = v
		}
	}
	return n, true
}

// gptqRows is the number of rows updated together (bounds the float64 working copy).
const gptqRows = 256

// Quantize runs GPTQ on w (rows×K, row-major) with fixed group scales (rows × K/g values, the
// BF16 scales already chosen), writing the levels to packed (rows·K/2 bytes, the pack-quantized
// nibble layout). Columns are processed in f.Perm order in blocks of 128: level
// q_k = rne(clamp(w'_k/s, -8, 7)) of the compensated weight w'_k = w_k + Σ_{i<k}(w_i − q_i·s_i)·N_ik
// (float64); a group with scale 0 gets level 0. It returns the number of elements whose nearest level lay
// outside [-8, 7]. Rows are independent: any range of rows gives the corresponding rows of the
// whole, and the result does not depend on GOMAXPROCS.
func (f *Factor) Quantize(ctx context.Context, packed []byte, w []float32, rows int, scales []float32, g int) (int64, error) {
	k := f.K
	if g <= 0 || k%g != 0 || k%8 != 0 || len(w) != rows*k || len(scales) != rows*(k/g) || len(packed) != rows*k/2 {
		return 0, fmt.Errorf("calib: GPTQ: shapes: %d weights, %d scales, %d packed bytes for %d×%d, group %d", len(w), len(scales), len(packed), rows, k, g)
	}
	bs := f.block
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	wk := make([]float64, min(rows, gptqRows)*k)
	ek := make([]float64, min(rows, gptqRows)*bs)
	lv := make([]int8, min(rows, gptqRows)*k)
	var clipped int64
	for r0 := 0; r0 < rows; r0 += gptqRows {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n := min(gptqRows, rows-r0)
		clipped += f.chunk(wk[:n*k], ek[:n*bs], lv[:n*k], w[r0*k:(r0+n)*k], n, scales[r0*(k/g):(r0+n)*(k/g)], g, bs)
		packLevels(packed[r0*k/2:(r0+n)*k/2], lv[:n*k])
	}
	return clipped, nil
}

// chunk runs GPTQ on n rows; lv receives the levels in the original column order. wk holds the
// compensated weights w' in processing order, ek the errors w − q·s of the current block.
func (f *Factor) chunk(wk, ek []float64, lv []int8, w []float32, n int, scales []float32, g, bs int) int64 {
	k, perm, nn := f.K, f.Perm, f.N
	ng := k / g
	for r := range n {
		for i, c := range perm {
			wk[r*k+i] = float64(w[r*k+c])
		}
	}
	var clipped int64
	for b0 := 0; b0 < k; b0 += bs {
		b1 := min(k, b0+bs)
		nb := b1 - b0
		for r := range n {
			row := wk[r*k : (r+1)*k]
			for i := b0; i < b1; i++ {
				c := perm[i]
				s := float64(scales[r*ng+c/g])
				var q float64
				if s != 0 {
					v := row[i] / s
					if v >= 7.5 || v < -8.5 {
						clipped++
					}
					q = math.RoundToEven(min(max(v, -8), 7))
				}
				lv[r*k+c] = int8(q)
				e := float64(w[r*k+c]) - q*s
				ek[r*nb+(i-b0)] = e
				if e == 0 {
					continue
				}
				ni := nn[i*k : (i+1)*k]
				for j := i + 1; j < b1; j++ {
					row[j] += e * ni[j]
				}
			}
		}
		if b1 < k {
			a := blas64.General{Rows: n, Cols: nb, Stride: nb, Data: ek[:n*nb]}
			b := blas64.General{Rows: nb, Cols: k - b1, Stride: k, Data: nn[b0*k+b1:]}
			c := blas64.General{Rows: n, Cols: k - b1, Stride: k, Data: wk[b1:]}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 1, c)
		}
	}
	return clipped
}

// packLevels writes levels in [-8, 7] as nibbles q+8, eight per little-endian 32-bit word.
func packLevels(dst []byte, lv []int8) {
	for i := 0; i < len(lv); i += 2 {
		dst[i/2] = byte(lv[i]+8) | byte(lv[i+1]+8)<<4
	}
}
