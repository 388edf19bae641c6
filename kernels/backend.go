package kernels

import (
	"errors"
	"fmt"

	"pdq/internal/floatcodec"
)

// Backend runs the quantization loops. Every implementation must give byte-identical results to
// CPU for every input (see the package documentation for the arithmetic rules). Methods work on
// one row-major slab; callers may split a tensor into slabs of whole rows (INT4: any rows; FP8:
// slabs starting on a multiple of FP8Block rows) and call a backend concurrently on disjoint
// slabs. Length errors are reported as errors wrapping ErrShape.
type Backend interface {
	// Name identifies the backend in logs and reports ("cpu", "cuda").
	Name() string

	// QuantizeInt4 quantizes src (rows×cols, row-major) in groups of p.GroupSize consecutive
	// elements of a row. It writes out.Packed (rows·cols/2 bytes: little-endian words of eight
	// nibbles), out.Scales (rows·cols/GroupSize BF16 codes, little-endian) and out.Stats (one
	// entry per group, row-major). A non-finite input is reported as a *NonFiniteError with the
	// first offending index (row-major within src) and nothing is promised about the outputs.
	QuantizeInt4(out Int4Out, src []float32, rows, cols int, p *Int4Params) error

	// DequantizeInt4 expands packed levels and float32 group scales into dst (rows×cols):
	// dst = (nibble-8)·scale, exact in float32 for BF16 scales.
	DequantizeInt4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) error

	// QuantizeFP8Block quantizes src (rows×cols) in FP8Block×FP8Block blocks starting at row 0
	// and column 0 into e4m3fn codes (rows·cols bytes) and one float32 multiplier per block
	// (ceil(rows/128)·ceil(cols/128), row-major): scale = absmax/448 over the block's real
	// elements, code = e4m3(x/scale). A block whose scale is 0 (all zeros) stores multiplier 1
	// and codes of ±0, so it dequantizes to zeros. Non-finite input: *NonFiniteError.
	QuantizeFP8Block(codes []byte, scaleInv []float32, src []float32, rows, cols int) error

	// DequantizeFP8Block expands e4m3fn codes with one multiplier per bh×bw block:
	// dst[i][j] = e4m3(codes[i][j]) · scale[i/bh][j/bw], scale having ceil(cols/bw) columns.
	// It also serves per-channel (bh=1, bw=cols) and per-tensor (bh=rows, bw=cols) scales.
	DequantizeFP8Block(dst []float32, codes []byte, scale []float32, rows, cols, bh, bw int) error

	// ErrorSums returns the float64 error sums of got against ref in eight lanes (element i in
	// lane i%8, lanes combined as a fixed tree; see errsums.go); element i is reported as index
	// base+i.
	ErrorSums(ref, got []float32, base int64) ErrSums
}

// FP8Block is the FP8 block edge (rows and columns).
const FP8Block = floatcodec.FP8Block

// FP8Max is the largest finite e4m3fn magnitude.
const FP8Max = 448

// GroupStats is what QuantizeInt4 reports for one group. Sums use the eight-lane float32 order.
type GroupStats struct {
	SumSq   float32 // Σx²
	Err     float32 // Σ(x - q·s)² with the scale and levels written
	RTNErr  float32 // the same for the reference rule s = bf16(absmax/7.5)
	Clipped int32   // elements whose nearest level lay outside [-8, 7] (x/s ≥ 7.5 or < -8.5)
}

// Int4Out holds the destination slices of QuantizeInt4 for a rows×cols slab.
type Int4Out struct {
	Packed []byte       // rows·cols/2 bytes
	Scales []byte       // rows·cols/GroupSize BF16 codes, little-endian
	Stats  []GroupStats // rows·cols/GroupSize entries
}

// ErrSums holds float64 error sums of a slice; see Backend.ErrorSums.
type ErrSums struct {
	N         int64
	SumSqRef  float64 // Σ ref²
	SumSqErr  float64 // Σ (got-ref)²
	SumAbsErr float64 // Σ |got-ref|
	Dot       float64 // Σ ref·got
	SumSqGot  float64 // Σ got²
	MaxAbsErr float64 // max |got-ref|
	MaxAbsIdx int64   // index of the first element reaching MaxAbsErr, -1 when N is 0
}

// ErrShape reports slices whose lengths do not match the dimensions given.
var ErrShape = errors.New("kernels: slice lengths do not match the shape")

// NonFiniteError reports the first NaN or ±Inf found in a kernel's input.
type NonFiniteError struct {
	Index int64   // row-major index within the slab
	Value float32 // the offending value
}

// Error describes the offending element.
func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("kernels: element %d is %v", e.Index, e.Value)
}

func shapeErr(what string, got, want int) error {
	return fmt.Errorf("%w: %s has %d elements, want %d", ErrShape, what, got, want)
}
