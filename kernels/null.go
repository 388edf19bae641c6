package kernels

// Null is a Backend that does no arithmetic: its quantizers leave their outputs as they are, its
// dequantizers leave dst as it is, and its error sums are zero. Its only use is measuring the
// conversion pipeline itself (reading, scheduling, writing, checksums, journal): a conversion run
// on Null, which convert also spares its own decoding and error sums, moves every byte a real
// one moves, and its output is not a valid checkpoint.
type Null struct{}

var _ Backend = Null{}

// Name returns "null".
func (Null) Name() string { return "null" }

// QuantizeInt4 does nothing.
func (Null) QuantizeInt4(Int4Out, []float32, int, int, *Int4Params) error { return nil }

// DequantizeInt4 does nothing.
func (Null) DequantizeInt4([]float32, []byte, []float32, int, int, int) error { return nil }

// QuantizeFP8Block does nothing.
func (Null) QuantizeFP8Block([]byte, []float32, []float32, int, int) error { return nil }

// DequantizeFP8Block does nothing.
func (Null) DequantizeFP8Block([]float32, []byte, []float32, int, int, int, int) error { return nil }

// ErrorSums returns zero sums.
func (Null) ErrorSums([]float32, []float32, int64) ErrSums { return ErrSums{MaxAbsIdx: -1} }
