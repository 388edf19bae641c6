package quantize

import (
	"fmt"
	"math"
	"sync"

	"pdq/kernels"
)

// Metrics accumulates the error of a dequantized tensor against its source, in float64.
// Add computes the sums of one slice in the kernels' eight-lane order (kernels.CPU.ErrorSums)
// and adds them to m; Merge adds another
// Metrics. Callers that split a tensor must add or merge the parts in a fixed order to get the
// same figures every run. The zero value is empty.
type Metrics struct {
	N         int64
	SumSqRef  float64 // Σ ref²
	SumSqErr  float64 // Σ (got-ref)²
	SumAbsErr float64 // Σ |got-ref|
	Dot       float64 // Σ ref·got
	SumSqGot  float64 // Σ got²
	MaxAbsErr float64 // largest |got-ref|
	MaxAbsIdx int64   // first element reaching MaxAbsErr
	Clipped   int64   // elements clipped by the quantizer (filled in by the caller)
}

// Add accumulates ref (the source) against got (its dequantized encoding); element i is
// reported as baseIndex+i. It panics when the slices differ in length.
func (m *Metrics) Add(ref, got []float32, baseIndex int64) {
	if len(ref) != len(got) {
		panic(fmt.Sprintf("quantize: Metrics.Add: %d reference elements, %d decoded", len(ref), len(got)))
	}
	if len(ref) == 0 {
		return
	}
	m.Merge(metricsOf(kernels.CPU{}.ErrorSums(ref, got, baseIndex)))
}

// Merge adds o to m. The largest error wins; between equal ones the lower index.
func (m *Metrics) Merge(o Metrics) {
	if o.N > 0 && (m.N == 0 || o.MaxAbsErr > m.MaxAbsErr || o.MaxAbsErr == m.MaxAbsErr && o.MaxAbsIdx < m.MaxAbsIdx) {
		m.MaxAbsErr, m.MaxAbsIdx = o.MaxAbsErr, o.MaxAbsIdx
	}
	m.N += o.N
	m.SumSqRef += o.SumSqRef
	m.SumSqErr += o.SumSqErr
	m.SumAbsErr += o.SumAbsErr
	m.Dot += o.Dot
	m.SumSqGot += o.SumSqGot
	m.Clipped += o.Clipped
}

// RMSE returns the root mean squared error.
func (m Metrics) RMSE() float64 { return math.Sqrt(m.SumSqErr / float64(m.N)) }

// RelRMSE returns ‖ref-got‖/‖ref‖.
func (m Metrics) RelRMSE() float64 { return math.Sqrt(m.SumSqErr / m.SumSqRef) }

// SQNR returns 10·log10(Σref²/Σ(ref-got)²) in dB, +Inf when the encoding is exact.
func (m Metrics) SQNR() float64 { return sqnr(m.SumSqRef, m.SumSqErr) }

// MeanAbsErr returns the mean absolute error.
func (m Metrics) MeanAbsErr() float64 { return m.SumAbsErr / float64(m.N) }

// Cosine returns the cosine similarity of ref and got: 1 when both are zero, 0 when only one is.
func (m Metrics) Cosine() float64 {
	if m.SumSqRef == 0 || m.SumSqGot == 0 {
		if m.SumSqRef == m.SumSqGot {
			return 1
		}
		return 0
	}
	return m.Dot / math.Sqrt(m.SumSqRef*m.SumSqGot)
}

// metricsOf converts a kernel's error sums.
func metricsOf(s kernels.ErrSums) Metrics {
	return Metrics{
		N: s.N, SumSqRef: s.SumSqRef, SumSqErr: s.SumSqErr, SumAbsErr: s.SumAbsErr,
		Dot: s.Dot, SumSqGot: s.SumSqGot, MaxAbsErr: s.MaxAbsErr, MaxAbsIdx: s.MaxAbsIdx,
	}
}

// scalePool holds the decoded scales AddInt4 needs for a slab, reused across calls.
var scalePool sync.Pool

// AddInt4 is Add(ref, got, baseIndex) for got the dequantization of q (DequantizeInt4 of its
// packed levels and BF16 scales), computed in one pass without materialising got. ref holds
// q.Rows×q.Cols values.
func (m *Metrics) AddInt4(ref []float32, q *Int4Result, baseIndex int64) error {
	buf, _ := scalePool.Get().(*[]float32)
	if buf == nil {
		buf = new([]float32)
	}
	defer scalePool.Put(buf)
	*buf = resize(*buf, len(q.Scales)/2)
	scales := *buf
	kernels.DecodeBF16(scales, q.Scales)
	s, err := kernels.CPU{}.ErrorSumsInt4(ref, q.Packed, scales, q.Rows, q.Cols, q.GroupSize, baseIndex)
	if err != nil {
		return fmt.Errorf("quantize: INT4 error sums: %w: %w", ErrBadShape, err)
	}
	m.Merge(metricsOf(s))
	return nil
}

// Measure accumulates the error of one slice given piece after piece in element order. Merged
// into a Metrics (MergeInto) it gives the bits Metrics.Add of the whole slice (against its dequantization)
// would, wherever the slice was cut: a caller that decodes and quantizes a slab band by band
// measures each band while it is in cache (a whole slab is one band). The zero value is empty.
type Measure struct{ acc kernels.ErrAccumulator }

// Add accumulates the next len(ref) elements: ref against got. It panics when the slices
// differ in length.
func (s *Measure) Add(ref, got []float32) {
	if len(ref) != len(got) {
		panic(fmt.Sprintf("quantize: Measure.Add: %d reference elements, %d decoded", len(ref), len(got)))
	}
	s.acc.Add(ref, got)
}

// AddFP8Block accumulates the next q.Rows×q.Cols elements: ref against the dequantization of
// q, which starts on a block row.
func (s *Measure) AddFP8Block(ref []float32, q *FP8Result) error {
	if err := s.acc.AddFP8Block(ref, q.Data, q.ScaleInv, q.Rows, q.Cols, kernels.FP8Block, kernels.FP8Block); err != nil {
		return fmt.Errorf("quantize: FP8 error sums: %w: %w", ErrBadShape, err)
	}
	return nil
}

// MergeInto adds everything accumulated to m, element i reported as baseIndex+i.
func (s *Measure) MergeInto(m *Metrics, baseIndex int64) {
	m.Merge(metricsOf(s.acc.Result(baseIndex)))
}
