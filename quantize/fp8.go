package quantize

import (
	"context"

	"pdq/kernels"
)

// FP8Result is an FP8 e4m3 block-quantized slab in the DeepSeek layout.
type FP8Result struct {
	Rows, Cols int
	// Data holds F8_E4M3 codes, shape [Rows, Cols].
	Data []byte
	// ScaleInv holds the per-block multipliers (weight_scale_inv), shape
	// [ceil(Rows/128), ceil(Cols/128)]: absmax(block)/448 over the block's real elements, and
	// 1 for an all-zero block (whose codes are all ±0, so it dequantizes to zeros).
	ScaleInv []float32
}

// QuantizeFP8Block quantizes w (rows×cols) to FP8 e4m3 in 128×128 blocks on opt.Backend: scale
// = absmax/448 in float32, code = e4m3(x/scale) rounded to nearest even. A slab must start on a
// multiple of 128 rows of the tensor. Non-finite input is refused (ErrNonFinite). The output does
// not depend on opt.Workers or the backend. FP8Bands takes a slab band by band.
func QuantizeFP8Block(ctx context.Context, w []float32, rows, cols int, opt FP8Options) (*FP8Result, error) {
	if rows < 0 || cols < 0 || len(w) != rows*cols {
		return nil, badShape("FP8 source has %d elements, want %d×%d", len(w), rows, cols)
	}
	res := new(FP8Result)
	sizeFP8(res, rows, cols)
	if err := quantizeFP8Rows(ctx, res, w, opt); err != nil {
		return nil, err
	}
	return res, nil
}

// DequantizeFP8Block expands 128×128-block FP8 codes into dst: dst = e4m3(code)·scaleInv[block].
func DequantizeFP8Block(dst []float32, data []byte, scaleInv []float32, rows, cols int) error {
	return DequantizeFP8BlockOn(nil, dst, data, scaleInv, rows, cols)
}

// FP8Options configures QuantizeFP8Block and FP8Bands.
type FP8Options struct {
	// Workers bounds the goroutines used on the CPU; <= 0 means GOMAXPROCS.
	Workers int
	// Backend runs the loops; nil means kernels.CPU.
	Backend kernels.Backend
	// FirstRow is the row of its tensor that the first row given is (a multiple of 128): errors
	// count rows and elements from the tensor's start. The output does not depend on it.
	FirstRow int
}

// sizeFP8 sizes res for rows×cols values, reusing its storage.
func sizeFP8(res *FP8Result, rows, cols int) {
	const b = kernels.FP8Block
	*res = FP8Result{
		Rows: rows, Cols: cols,
		Data:     resize(res.Data, rows*cols),
		ScaleInv: resize(res.ScaleInv, (rows+b-1)/b*((cols+b-1)/b)),
	}
}

// quantizeFP8Rows fills res (sized) from w, chunks of block rows over opt.Workers.
func quantizeFP8Rows(ctx context.Context, res *FP8Result, w []float32, opt FP8Options) error {
	rows, cols := res.Rows, res.Cols
	if cols == 0 {
		return ctx.Err()
	}
	const b = kernels.FP8Block
	bc := (cols + b - 1) / b
	be := backendOr(opt.Backend)
	bands := (rows + b - 1) / b
	step := slabStep(be, max(1, chunkElems/(b*cols)), bands)
	return forChunks(ctx, bands, step, opt.Workers, func(b0, b1 int) error {
		r0, r1 := b0*b, min(rows, b1*b)
		return kernelErr(be, be.QuantizeFP8Block(res.Data[r0*cols:r1*cols], res.ScaleInv[b0*bc:b1*bc], w[r0*cols:r1*cols], r1-r0, cols), opt.FirstRow+r0, cols)
	})
}

// FP8Bands quantizes a slab to FP8 blocks one band of block rows at a time, each band's values
// given when the caller has them (decoded just before, still in cache): Begin, then Add for
// consecutive bands in row order. The result is QuantizeFP8Block's over the whole slab,
// byte for byte, however the slab is cut (blocks are quantized independently).
type FP8Bands struct {
	dst  *FP8Result
	opt  FP8Options
	next int // the slab's row the next band starts at
}

// Begin starts a slab of rows×cols values quantized into dst (whose storage it reuses).
func (b *FP8Bands) Begin(dst *FP8Result, rows, cols int, opt FP8Options) error {
	if rows < 0 || cols < 0 {
		return badShape("FP8 source of %d×%d", rows, cols)
	}
	sizeFP8(dst, rows, cols)
	*b = FP8Bands{dst: dst, opt: opt}
	return nil
}

// Add quantizes the slab's next n rows, whose values w holds, and returns the band's part of
// the result (for its error sums). Every band but the last has a multiple of 128 rows.
func (b *FP8Bands) Add(ctx context.Context, w []float32, n int) (*FP8Result, error) {
	const bs = kernels.FP8Block
	res := b.dst
	cols := res.Cols
	if n < 0 || b.next+n > res.Rows || len(w) != n*cols || b.next%bs != 0 {
		return nil, badShape("FP8 band of %d elements at row %d, want %d×%d within %d rows on a block row", len(w), b.next, n, cols, res.Rows)
	}
	bc := (cols + bs - 1) / bs
	band := &FP8Result{
		Rows: n, Cols: cols,
		Data:     res.Data[b.next*cols : (b.next+n)*cols],
		ScaleInv: res.ScaleInv[b.next/bs*bc : (b.next+n+bs-1)/bs*bc],
	}
	opt := b.opt
	opt.Workers, opt.FirstRow = 1, b.opt.FirstRow+b.next
	if err := quantizeFP8Rows(ctx, band, w, opt); err != nil {
		return nil, err
	}
	b.next += n
	return band, nil
}

// DequantizeFP8BlockOn is DequantizeFP8Block on backend be (nil: kernels.CPU).
func DequantizeFP8BlockOn(be kernels.Backend, dst []float32, data []byte, scaleInv []float32, rows, cols int) error {
	if rows < 0 || cols < 0 {
		return badShape("FP8 dequantize %d×%d", rows, cols)
	}
	be = backendOr(be)
	return kernelErr(be, be.DequantizeFP8Block(dst, data, scaleInv, rows, cols, kernels.FP8Block, kernels.FP8Block), 0, max(cols, 1))
}
