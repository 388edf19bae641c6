//go:build cuda || cudaemu

package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"unsafe"

	"pdq/kernels"
)

// cholBlock is calib's factorization block (kernels.GemmKC): the device reproduces its order.
const cholBlock = kernels.GemmKC

// FactorUnitUpper is the device twin of calib's choleskyLower followed by reverseToUnitUpper:
// a (k×k, row-major float32) is the reversed, permuted, dampened Hessian as calib.Factorize
// prepares it; on success n receives the unit upper triangular N in processing order and ok is
// true; ok is false when a is not numerically positive definite or N not finite. a is left
// unchanged; the bytes of n are the CPU's.
func (o Ops) FactorUnitUpper(ctx context.Context, n, a []float32, k int) (ok bool, err error) {
	if k <= 0 || len(a) != k*k || len(n) != k*k {
		return false, fmt.Errorf("cuda: GPTQ factor: %d and %d values for K=%d: %w", len(a), len(n), k, kernels.ErrShape)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	flagAt := 4 * k * k
	bt := roundUp(flagAt+8, 16) // device scratch: the solved panel, transposed
	err = o.R.Run(Job{
		Chunks: 1,
		Sizes:  func(int) (int, int) { return 4 * k * k, bt + 4*cholBlock*k },
		Back:   func(int) int { return flagAt + 8 },
		Stage:  func(_ int, in []byte) { copy(in, f32Bytes(a)) },
		Launch: func(_ int, s Stream, din, dout uint64) error {
			if err := s.Memset8(dout+uint64(flagAt), 0, 8); err != nil {
				return err
			}
			flag := dout + uint64(flagAt)
			for j0 := 0; j0 < k; j0 += cholBlock {
				w := min(cholBlock, k-j0)
				if err := s.Launch(CholDiag, 1, 1, 128, din, flag, uint64(k), uint64(j0), uint64(w)); err != nil {
					return err
				}
				m := k - j0 - w
				if m == 0 {
					break
				}
				if err := s.Launch(CholPanel, o.R.Grid(m, 128), 1, 128, din, dout+uint64(bt), uint64(k), uint64(j0), uint64(w)); err != nil {
					return err
				}
				if err := s.Launch(CholTrail, o.R.Grid(m*m, 256), 1, 256, din, dout+uint64(bt), uint64(k), uint64(j0), uint64(w)); err != nil {
					return err
				}
			}
			return s.Launch(CholUnitUpper, o.R.Grid(k*k, 256), 1, 256, dout, flag, din, uint64(k))
		},
		Finish: func(_ int, out []byte) error {
			ok = binary.LittleEndian.Uint64(out[flagAt:]) == 0
			if ok {
				copy(f32Bytes(n), out[:flagAt])
			}
			return nil
		},
	})
	return ok, err
}

// QuantizeGPTQ is the device twin of calib.Factor.Quantize: GPTQ's column loop over w
// (rows×k, row-major) with the fixed group scales (rows × k/g float32), processing order perm,
// factor nn (k×k) and column blocks of bs, writing the levels to packed (rows·k/2 bytes) and
// returning the number of levels clipped. The bytes are the CPU's. All rows run at once, one
// device thread per row for the columns of a block, one per element for the block's update,
// on column-major working copies (consecutive threads, consecutive rows).
func (o Ops) QuantizeGPTQ(ctx context.Context, packed []byte, w []float32, rows, k int, perm []int, nn, scales []float32, g, bs int) (int64, error) {
	if g <= 0 || k%g != 0 || k%8 != 0 || bs <= 0 || rows < 0 || len(w) != rows*k || len(scales) != rows*(k/g) ||
		len(packed) != rows*k/2 || len(perm) != k || len(nn) != k*k {
		return 0, fmt.Errorf("cuda: GPTQ: shapes: %d weights, %d scales, %d packed bytes for %d×%d, group %d: %w", len(w), len(scales), len(packed), rows, k, g, kernels.ErrShape)
	}
	if rows == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p64 := make([]int64, k)
	for i, c := range perm {
		p64[i] = int64(c)
	}
	ng := k / g
	// Input: w, scales, perm, nn. Output: packed, clipped per row | scratch: wk, ek, levels.
	inScales := 4 * rows * k
	inPerm := inScales + roundUp(4*rows*ng, 8)
	inN := inPerm + 8*k
	inTotal := inN + 4*k*k
	outClipped := roundUp(rows*k/2, 8)
	back := outClipped + 8*rows
	outWk := roundUp(back, 16)
	outEk := outWk + 4*rows*k
	outLv := outEk + 4*rows*bs
	outTotal := outLv + rows*k
	var clipped int64
	err := o.R.Run(Job{
		Chunks: 1,
		Sizes:  func(int) (int, int) { return inTotal, outTotal },
		Back:   func(int) int { return back },
		Stage: func(_ int, in []byte) {
			copy(in, f32Bytes(w))
			copy(in[inScales:], f32Bytes(scales))
			copy(in[inPerm:], unsafe.Slice((*byte)(unsafe.Pointer(&p64[0])), 8*k))
			copy(in[inN:], f32Bytes(nn))
		},
		Launch: func(_ int, s Stream, din, dout uint64) error {
			at := func(off int) uint64 { return dout + uint64(off) }
			if err := s.Memset8(at(outClipped), 0, 8*rows); err != nil {
				return err
			}
			if err := s.Launch(GPTQPerm, o.R.Grid(rows*k, 256), 1, 256, at(outWk), din, din+uint64(inPerm), uint64(rows), uint64(k)); err != nil {
				return err
			}
			for b0 := 0; b0 < k; b0 += bs {
				b1 := min(k, b0+bs)
				if err := s.Launch(GPTQBlock, o.R.Grid(rows, 64), 1, 64, at(outWk), at(outEk), at(outLv), at(outClipped),
					din, din+uint64(inPerm), din+uint64(inScales), din+uint64(inN),
					uint64(rows), uint64(k), uint64(b0), uint64(b1), uint64(g)); err != nil {
					return err
				}
				if b1 < k {
					if err := s.Launch(GPTQUpdate, o.R.Grid(rows*(k-b1), 256), 1, 256, at(outWk), at(outEk), din+uint64(inN),
						uint64(rows), uint64(k), uint64(b0), uint64(b1)); err != nil {
						return err
					}
				}
			}
			return s.Launch(GPTQPack, o.R.Grid(rows*k/2, 256), 1, 256, dout, at(outLv), uint64(rows*k/2))
		},
		Finish: func(_ int, out []byte) error {
			copy(packed, out[:rows*k/2])
			for r := range rows {
				clipped += int64(binary.LittleEndian.Uint64(out[outClipped+8*r:]))
			}
			return nil
		},
	})
	return clipped, err
}

// FactorUnitUpper is Ops.FactorUnitUpper on one of the devices.
func (p *Pool) FactorUnitUpper(ctx context.Context, n, a []float32, k int) (ok bool, err error) {
	p.on(func(o Ops) { ok, err = o.FactorUnitUpper(ctx, n, a, k) })
	return ok, err
}

// QuantizeGPTQ is Ops.QuantizeGPTQ on one of the devices.
func (p *Pool) QuantizeGPTQ(ctx context.Context, packed []byte, w []float32, rows, k int, perm []int, nn, scales []float32, g, bs int) (c int64, err error) {
	p.on(func(o Ops) { c, err = o.QuantizeGPTQ(ctx, packed, w, rows, k, perm, nn, scales, g, bs) })
	return c, err
}
