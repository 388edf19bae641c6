package kernels

import (
	"fmt"
	"math"
)

// Dense float32 matrix products for the calibration code (GPTQ's factorization and lazy block
// updates). Like the quantization loops, every loop set gives the same bits: each element of C
// is updated once per block of GemmKC inner indices, C ← C + t (or C − t), where t starts at 0
// and accumulates a·b over the block in index order with fused multiply-adds rounded once to
// float32 (fma32). The tiling of rows and columns does not enter the result, so it does not
// depend on the CPU, the loop set or the number of goroutines a caller splits the rows over.
// (One exception: when several operands of a sum are NaNs of different payloads, which one comes
// out is not specified. Sources holding a NaN are refused, and the arithmetic makes only the
// default NaN.)

// GemmKC is the number of inner indices summed before C is updated (see MatMulAddF32).
const GemmKC = 128

// Micro-tile of the loop sets: gemmMR rows × gemmNR columns of C per kernel call.
const (
	gemmMR = 4
	gemmNR = 32
	gemmNC = 512 // columns of B packed at a time
)

// MatF32 is a row-major float32 matrix view: element (i, j) is Data[i*Stride+j].
type MatF32 struct {
	Data               []float32
	Rows, Cols, Stride int
}

func (m MatF32) check(name string) error {
	if m.Rows < 0 || m.Cols < 0 || m.Stride < m.Cols {
		return fmt.Errorf("kernels: matrix %s: %d×%d with stride %d: %w", name, m.Rows, m.Cols, m.Stride, ErrShape)
	}
	if m.Rows > 0 && m.Cols > 0 && len(m.Data) < (m.Rows-1)*m.Stride+m.Cols {
		return fmt.Errorf("kernels: matrix %s: %d values for %d×%d with stride %d: %w", name, len(m.Data), m.Rows, m.Cols, m.Stride, ErrShape)
	}
	return nil
}

// MatMulAddF32 computes C ← C + A·B (sub false) or C ← C − A·B (sub true) for A (m×k), B (k×n)
// and C (m×n), in the block order of the package rule above. With lower set, only the tiles of
// C that hold an element on or below the diagonal (j ≤ i) are computed: the other elements above
// the diagonal are left or updated, unspecified (for symmetric rank-k updates of a lower
// triangle). Shapes that do not fit give ErrShape.
func MatMulAddF32(c, a, b MatF32, sub, lower bool) error {
	for _, x := range []struct {
		n string
		m MatF32
	}{{"C", c}, {"A", a}, {"B", b}} {
		if err := x.m.check(x.n); err != nil {
			return err
		}
	}
	if a.Rows != c.Rows || b.Cols != c.Cols || a.Cols != b.Rows {
		return fmt.Errorf("kernels: product of %d×%d and %d×%d into %d×%d: %w", a.Rows, a.Cols, b.Rows, b.Cols, c.Rows, c.Cols, ErrShape)
	}
	m, n, k := c.Rows, c.Cols, a.Cols
	if m == 0 || n == 0 || k == 0 {
		return nil
	}
	kern := lp.gemmTile
	bp := make([]float32, GemmKC*gemmNC)
	ap := make([]float32, GemmKC*((m+gemmMR-1)/gemmMR*gemmMR))
	var tile [gemmMR * gemmNR]float32
	for pc := 0; pc < k; pc += GemmKC {
		kc := min(GemmKC, k-pc)
		packA(ap, a, 0, m, pc, kc, sub) // all of A's rows once per block of inner indices
		for jc := 0; jc < n; jc += gemmNC {
			nc := min(gemmNC, n-jc)
			if lower && jc > m-1 {
				break
			}
			packB(bp, b, pc, kc, jc, nc)
			// Row tiles outermost: a row panel of A stays in the first-level cache while it
			// meets every column panel of B, and each row of C is met in order.
			for r0 := 0; r0 < m; r0 += gemmMR {
				api := ap[r0*kc : (r0+gemmMR)*kc]
				mr := min(gemmMR, m-r0)
				for j := 0; j < nc; j += gemmNR {
					bpj := bp[j*kc : (j+gemmNR)*kc]
					nr := min(gemmNR, nc-j)
					c0 := jc + j
					if lower && r0 < max(0, c0-gemmMR+1)/gemmMR*gemmMR {
						continue // above the first row tile reaching the diagonal
					}
					if mr == gemmMR && nr == gemmNR {
						kern(kc, api, bpj, c.Data[r0*c.Stride+c0:], c.Stride)
						continue
					}
					clear(tile[:])
					kern(kc, api, bpj, tile[:], gemmNR)
					for ii := range mr {
						row := c.Data[(r0+ii)*c.Stride+c0:]
						for jj := range nr {
							row[jj] += tile[ii*gemmNR+jj]
						}
					}
				}
			}
		}
	}
	return nil
}

// packB copies B[pc:pc+kc, jc:jc+nc] into panels of gemmNR columns, each kc×gemmNR row-major,
// padded with zeros.
func packB(dst []float32, b MatF32, pc, kc, jc, nc int) {
	for j := 0; j < nc; j += gemmNR {
		pan := dst[j*kc : (j+gemmNR)*kc]
		nr := min(gemmNR, nc-j)
		for p := range kc {
			row := b.Data[(pc+p)*b.Stride+jc+j:]
			d := pan[p*gemmNR : (p+1)*gemmNR]
			copy(d, row[:nr])
			clear(d[nr:])
		}
	}
}

// packA copies A[ic:ic+mc, pc:pc+kc] (negated when neg) into panels of gemmMR rows, each
// kc×gemmMR with the rows interleaved, padded with zeros.
func packA(dst []float32, a MatF32, ic, mc, pc, kc int, neg bool) {
	sign := float32(1)
	if neg {
		sign = -1
	}
	for i := 0; i < mc; i += gemmMR {
		pan := dst[i*kc : (i+gemmMR)*kc]
		mr := min(gemmMR, mc-i)
		for ii := range gemmMR {
			if ii >= mr {
				for p := range kc {
					pan[p*gemmMR+ii] = 0
				}
				continue
			}
			row := a.Data[(ic+i+ii)*a.Stride+pc:]
			for p := range kc {
				pan[p*gemmMR+ii] = sign * row[p]
			}
		}
	}
}

// gemmTileScalar is the specification of the micro-kernel: for the gemmMR×gemmNR tile at c
// (row stride ldc), c[i][j] += Σ_p ap[p][i]·bp[p][j] with the sum formed by fma32 in p order from 0.
func gemmTileScalar(kc int, ap, bp, c []float32, ldc int) {
	ap, bp = ap[:kc*gemmMR], bp[:kc*gemmNR]
	var t [gemmMR * gemmNR]float32 // p outermost: independent sums, not one long dependency chain
	for p := range kc {
		b := (*[gemmNR]float32)(bp[p*gemmNR:])
		for i := range gemmMR {
			a, ti := ap[p*gemmMR+i], (*[gemmNR]float32)(t[i*gemmNR:])
			for j, bj := range b {
				// fma32, its common case written out (the function is too large to inline)
				p := float64(float64(a) * float64(bj))
				s := p + float64(ti[j])
				if u := math.Float64bits(s); u&(1<<29-1) != 1<<28 && (u>>52)&0x7ff >= 897 {
					ti[j] = float32(s)
				} else {
					ti[j] = fma32Slow(p, float64(ti[j]), s)
				}
			}
		}
	}
	for i := range gemmMR {
		row := c[i*ldc : i*ldc+gemmNR]
		for j := range row {
			row[j] += t[i*gemmNR+j]
		}
	}
}

// AxpyF32 sets y[i] ← fma32(a, x[i], y[i]) for i < len(y) (len(x) ≥ len(y)).
func AxpyF32(y, x []float32, a float32) { lp.axpy(y, x[:len(y)], a) }

func axpyScalar(y, x []float32, a float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] = fma32(a, x[i], y[i])
	}
}

// fma32 returns a·b + c rounded once to float32, as the FMA instructions do. The product is
// exact in float64; the sum s is rounded to float64 and its error e recovered exactly (TwoSum).
// Rounding s to float32 is then correct unless s lies exactly halfway between two float32
// values with e ≠ 0: the exact sum is then on the side of e.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	s := p + float64(c)
	// A float32 midpoint in the normal range (|s| >= 2^-126: biased exponent >= 897) has the
	// 29 low bits of s equal to 1<<28; anything else (Inf and NaN included) rounds correctly
	// from s.
	if b := math.Float64bits(s); b&(1<<29-1) != 1<<28 && (b>>52)&0x7ff >= 897 {
		return float32(s)
	}
	return fma32Slow(p, float64(c), s)
}

// fma32Slow is fma32 for sums s = p + c that may lie on a float32 midpoint or be subnormal.
func fma32Slow(p, c, s float64) float32 {
	r := float32(s)
	if float64(r) == s || math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	bb := s - p
	e := (p - (s - bb)) + (c - bb)
	if e == 0 {
		return r
	}
	lo, hi := r, r
	if float64(r) < s {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if float64(lo)/2+float64(hi)/2 != s {
		return r
	}
	if e > 0 {
		return hi
	}
	return lo
}
