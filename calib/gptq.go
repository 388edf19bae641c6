package calib

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"pdq/kernels"
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
	Device    Device  // when set, the factorization and the column loop run on it (same bytes)
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
// reversed matrix, with no inverse to compute.
//
// The arithmetic is float32 (as in the published implementation) on the kernels' matrix
// product (kernels.MatMulAddF32), whose bits do not depend on the CPU or its SIMD level; the
// diagonal blocks of the factorization sum in float64. A GPU backend would replace Factorize
// and Factor.Quantize with the same inputs and outputs: the Hessian in, N and the levels out.
type Factor struct {
	K    int
	Perm []int     // Perm[i] is the column processed i-th
	N    []float32 // K×K, row-major, unit upper triangular, in processing order
	Damp float64   // the dampening finally used, as a fraction of the mean diagonal
	// Tries is the number of factorizations attempted (1 when the first succeeded).
	Tries int
	block int
	dev   Device
}

// cholBlock is the column block of the factorization: diagonal blocks are factorized
// directly, the panel below solved against them and the trailing matrix updated by one product.
const cholBlock = kernels.GemmKC

// panelCols is the slice of the panel solved at a time (its transpose, 128 × 512 float32,
// stays in the L2 cache).
const panelCols = 512

// Factorize prepares GPTQ for the K×K Hessian h (row-major, symmetric, float64). Columns whose
// diagonal is zero (inputs never active) get only the dampening, so their errors are not
// propagated. When the Cholesky factorization fails, it is retried with ten times the
// dampening, up to o.Retries times; then ErrIllConditioned. The factorization checks ctx
// between column blocks (about K/128 times), so a cancelled run stops within one block's
// trailing update.
func Factorize(ctx context.Context, h []float64, k int, o GPTQOptions) (*Factor, error) {
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
	a := make([]float32, k*k)
	damp := o.Damp
	f := &Factor{K: k, Perm: perm, block: o.BlockSize, dev: o.Device}
	for try := 0; try <= max(o.Retries, 0); try++ {
		f.Tries = try + 1
		lambda := damp * mean
		for i := range k {
			pi := perm[k-1-i]
			for j := range k {
				a[i*k+j] = float32(h[pi*k+perm[k-1-j]])
			}
			a[i*k+i] = float32(h[pi*k+pi] + lambda)
		}
		ok, err := factorUnitUpper(ctx, o.Device, a, k)
		if err != nil {
			return nil, err
		}
		if ok {
			f.N, f.Damp = a, damp
			return f, nil
		}
		damp *= 10
	}
	return nil, fmt.Errorf("calib: GPTQ: dampening up to %g of the mean diagonal: %w", damp/10, ErrIllConditioned)
}

// choleskyLower overwrites the lower triangle of the K×K matrix a (row-major, float32) with
// its Cholesky factor L (a = L·Lᵀ), blocked by cholBlock columns; the upper triangle is left
// undefined. It returns false when a is not numerically positive definite, and ctx's error
// when ctx ends first.
func choleskyLower(ctx context.Context, a []float32, k int) (bool, error) {
	bt := make([]float32, cholBlock*k)
	for j0 := 0; j0 < k; j0 += cholBlock {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		j1 := min(k, j0+cholBlock)
		w := j1 - j0
		// Diagonal block, summed in float64 (the explicit conversions keep every product
		// rounded alike whether or not the compiler fuses).
		for c := j0; c < j1; c++ {
			rc := a[c*k+j0 : c*k+c]
			d := float64(a[c*k+c])
			for _, x := range rc {
				d -= float64(float64(x) * float64(x))
			}
			if !(d > 0) || math.IsInf(d, 0) {
				return false, nil
			}
			l := math.Sqrt(d)
			a[c*k+c] = float32(l)
			for r := c + 1; r < j1; r++ {
				rr := a[r*k+j0 : r*k+c]
				s := float64(a[r*k+c])
				for p, x := range rr {
					s -= float64(float64(x) * float64(rc[p]))
				}
				a[r*k+c] = float32(s / l)
			}
		}
		if j1 == k {
			break
		}
		// Panel: L21 = A21·L11⁻ᵀ, on its transpose X = A21ᵀ (w × m, the product's B operand
		// too), in slices of panelCols rows of A21: for each p, X_p ← X_p / L_pp, then
		// X_c ← X_c − L_cp·X_p for c > p, long vector loops over the rows.
		m := k - j1
		x := bt[:w*m]
		for r := range m {
			row := a[(j1+r)*k+j0 : (j1+r)*k+j1]
			for p, v := range row {
				x[p*m+r] = v
			}
		}
		for r0 := 0; r0 < m; r0 += panelCols {
			r1 := min(m, r0+panelCols)
			for p := range w {
				xp := x[p*m+r0 : p*m+r1]
				d := a[(j0+p)*k+j0+p]
				for i := range xp {
					xp[i] /= d
				}
				for c := p + 1; c < w; c++ {
					kernels.AxpyF32(x[c*m+r0:c*m+r1], xp, -a[(j0+c)*k+j0+p])
				}
			}
		}
		for r := range m {
			row := a[(j1+r)*k+j0 : (j1+r)*k+j1]
			for p := range row {
				row[p] = x[p*m+r]
			}
		}
		// Trailing matrix: A22 −= L21·L21ᵀ, lower tiles only.
		err := kernels.MatMulAddF32(
			kernels.MatF32{Data: a[j1*k+j1:], Rows: m, Cols: m, Stride: k},
			kernels.MatF32{Data: a[j1*k+j0:], Rows: m, Cols: w, Stride: k},
			kernels.MatF32{Data: bt[:w*m], Rows: w, Cols: m, Stride: m}, true, true)
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// reverseToUnitUpper turns the Cholesky factor L of the reversed matrix (lower triangle of a)
// into N in processing order, in place: T[i][j] = L[k-1-i][k-1-j] (j ≥ i) and
// N[i][j] = T[i][j]/T[j][j]; the lower triangle becomes zero. False when a value is not finite.
func reverseToUnitUpper(a []float32, k int) bool {
	diag := make([]float32, k)
	for j := range k {
		diag[j] = a[(k-1-j)*k+(k-1-j)] // T[j][j]
		if !(diag[j] > 0) || math.IsInf(float64(diag[j]), 0) {
			return false
		}
	}
	for i := range k {
		src := a[(k-1-i)*k : (k-i)*k]
		for j := i + 1; j < k; j++ {
			v := src[k-1-j] / diag[j]
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false
			}
			a[i*k+j] = v
		}
	}
	for i := range k {
		clear(a[i*k : i*k+i])
		a[i*k+i] = 1
	}
	return true
}

// gptqRows is the number of rows updated together (bounds the working copy).
const gptqRows = 256

// Quantize runs GPTQ on w (rows×K, row-major) with fixed group scales (rows × K/g values, the
// BF16 scales already chosen), writing the levels to packed (rows·K/2 bytes, the pack-quantized
// nibble layout). Columns are processed in f.Perm order in blocks of 128: level
// q_k = rne(clamp(w'_k/s, -8, 7)) of the compensated weight w'_k = w_k + Σ_{i<k}(w_i − q_i·s_i)·N_ik
// (float32; inside a block by fused multiply-adds column after column, from one block to the
// later columns by one matrix product); a group with scale 0 gets level 0. It returns the number
// of elements whose nearest level lay outside [-8, 7]. Rows are independent: any range of rows
// gives the corresponding rows of the whole, and the result depends neither on GOMAXPROCS nor
// on the CPU's SIMD level.
func (f *Factor) Quantize(ctx context.Context, packed []byte, w []float32, rows int, scales []float32, g int) (int64, error) {
	k := f.K
	if g <= 0 || k%g != 0 || k%8 != 0 || len(w) != rows*k || len(scales) != rows*(k/g) || len(packed) != rows*k/2 {
		return 0, fmt.Errorf("calib: GPTQ: shapes: %d weights, %d scales, %d packed bytes for %d×%d, group %d", len(w), len(scales), len(packed), rows, k, g)
	}
	bs := f.block
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	if f.dev != nil {
		return f.dev.QuantizeGPTQ(ctx, packed, w, rows, k, f.Perm, f.N, scales, g, bs)
	}
	wk := make([]float32, min(rows, gptqRows)*k)
	ek := make([]float32, min(rows, gptqRows)*bs)
	lv := make([]int8, min(rows, gptqRows)*k)
	var clipped int64
	for r0 := 0; r0 < rows; r0 += gptqRows {
		n := min(gptqRows, rows-r0)
		c, err := f.chunk(ctx, wk[:n*k], ek[:n*bs], lv[:n*k], w[r0*k:(r0+n)*k], n, scales[r0*(k/g):(r0+n)*(k/g)], g, bs)
		if err != nil {
			return 0, err
		}
		clipped += c
		packLevels(packed[r0*k/2:(r0+n)*k/2], lv[:n*k])
	}
	return clipped, nil
}

// chunk runs GPTQ on n rows; lv receives the levels in the original column order. wk holds the
// compensated weights w' in processing order, ek the errors w − q·s of the current block.
func (f *Factor) chunk(ctx context.Context, wk, ek []float32, lv []int8, w []float32, n int, scales []float32, g, bs int) (int64, error) {
	k, perm, nn := f.K, f.Perm, f.N
	ng := k / g
	for r := range n {
		for i, c := range perm {
			wk[r*k+i] = w[r*k+c]
		}
	}
	var clipped int64
	for b0 := 0; b0 < k; b0 += bs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b1 := min(k, b0+bs)
		nb := b1 - b0
		for r := range n {
			row := wk[r*k : (r+1)*k]
			for i := b0; i < b1; i++ {
				c := perm[i]
				s := scales[r*ng+c/g]
				var q float32
				if s != 0 {
					v := row[i] / s
					if v >= 7.5 || v < -8.5 {
						clipped++
					}
					q = float32(math.RoundToEven(float64(min(max(v, -8), 7))))
				}
				lv[r*k+c] = int8(q)
				e := w[r*k+c] - float32(q*s)
				ek[r*nb+(i-b0)] = e
				if e != 0 && i+1 < b1 {
					kernels.AxpyF32(row[i+1:b1], nn[i*k+i+1:i*k+b1], e)
				}
			}
		}
		if b1 < k {
			err := kernels.MatMulAddF32(
				kernels.MatF32{Data: wk[b1:], Rows: n, Cols: k - b1, Stride: k},
				kernels.MatF32{Data: ek[:n*nb], Rows: n, Cols: nb, Stride: nb},
				kernels.MatF32{Data: nn[b0*k+b1:], Rows: nb, Cols: k - b1, Stride: k}, false, false)
			if err != nil {
				return 0, err
			}
		}
	}
	return clipped, nil
}

// packLevels writes levels in [-8, 7] as nibbles q+8, eight per little-endian 32-bit word.
func packLevels(dst []byte, lv []int8) {
	for i := 0; i < len(lv); i += 2 {
		dst[i/2] = byte(lv[i]+8) | byte(lv[i+1]+8)<<4
	}
}
