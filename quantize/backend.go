package quantize

import (
	"context"
	"fmt"

	"pdq/kernels"
	"pdq/safetensors"
)

// Backend-aware forms of the quantize entry points; the plain functions are these on
// kernels.CPU. Results are identical for every backend (the Backend contract: identical bytes).

// slabStep returns the rows per backend call: CPU calls take chunks of about chunkElems
// elements spread over the workers; any other backend (a GPU) gets the whole slab in one call,
// as it splits and pipelines the work itself and small calls would only add latency.
func slabStep(be kernels.Backend, cpuStep, rows int) int {
	if _, cpu := be.(kernels.CPU); cpu || be == nil {
		return cpuStep
	}
	return max(rows, 1)
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

func backendOr(be kernels.Backend) kernels.Backend {
	if be == nil {
		return kernels.CPU{}
	}
	return be
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

// DecodeFP8BlockOn is DecodeFP8Block on backend be (nil: kernels.CPU): the FP8-block source
// decode e4m3(code)·scale with the block size inferred from the scale shape.
func DecodeFP8BlockOn(be kernels.Backend, dst []float32, src []byte, scale []float32, scaleShape []int64, rows, cols int) error {
	bh, bw, err := FP8BlockSize(rows, cols, scaleShape)
	if err != nil {
		return err
	}
	if int64(len(scale)) != scaleShape[0]*scaleShape[1] {
		return badShape("FP8 block scale has %d elements, shape %v", len(scale), scaleShape)
	}
	if err := checkScales(scale); err != nil {
		return err
	}
	be = backendOr(be)
	return kernelErr(be, be.DequantizeFP8Block(dst, src, scale, rows, cols, bh, bw), 0, cols)
}

// DequantizeInt4On is DequantizeInt4 on backend be (nil: kernels.CPU): the scales are decoded
// and checked on the host, the expansion runs on the backend.
func DequantizeInt4On(be kernels.Backend, dst []float32, packed, scales []byte, scaleDType safetensors.DType, rows, cols, groupSize int) error {
	be = backendOr(be)
	g := GroupWidth(groupSize, cols)
	if rows < 0 || cols <= 0 || g <= 0 || g%8 != 0 || cols%g != 0 {
		return badShape("INT4 dequantize: group %d does not divide %d columns in multiples of 8", groupSize, cols)
	}
	if len(dst) != rows*cols || len(packed) != rows*cols/2 {
		return badShape("INT4 dequantize %d×%d: dst has %d elements, packed %d bytes", rows, cols, len(dst), len(packed))
	}
	if scaleDType != safetensors.BF16 && scaleDType != safetensors.F16 && scaleDType != safetensors.F32 {
		return fmt.Errorf("quantize: INT4 scales of dtype %s: %w", scaleDType, safetensors.ErrUnsupportedDType)
	}
	n := rows * cols / g
	if len(scales)*8 != n*scaleDType.Bits() {
		return badShape("INT4 dequantize: %d scale bytes for %d %s scales", len(scales), n, scaleDType)
	}
	s := make([]float32, n)
	if err := safetensors.DecodeFloat32(s, scales, scaleDType); err != nil {
		return fmt.Errorf("quantize: INT4 scales: %w", err)
	}
	if i := firstNonFinite(s); i >= 0 {
		return fmt.Errorf("quantize: INT4 scale %d is %v: %w", i, s[i], ErrNonFinite)
	}
	return kernelErr(be, be.DequantizeInt4(dst, packed, s, rows, cols, g), 0, cols)
}
