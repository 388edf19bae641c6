package convert

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"pdq/internal/fsutil"
	"pdq/kernels"
	"pdq/quantize"
	"pdq/safetensors"
)

// slab is a range of rows of one module, the unit of work: read, decode, quantize, write.
type slab struct {
	mi, si     int   // module index, slab index within the module
	r0, r1     int   // rows
	wOff, wLen int64 // the bytes of the weight these rows are, from the tensor's start
	sOff, sLen int64 // the bytes of the scale companion they use (none without one)
	copyOnly   bool  // read for the prefill copy of its shard alone: every output tensor is done
	raw        []byte
	rawBase    []byte // the pooled buffer raw lies in
	scaleRaw   []byte
	packed     *packedRaw // an already-quantized module's companions (Module.Packed)
	rawCRC     uint32     // CRC-32C of raw and of scaleRaw, taken as they were read, for the copier
	scaleCRC   uint32
	cost       int64
	refs       atomic.Int32 // holders (a worker, the copier); the last returns raw and cost
}

// ranges sets the byte ranges of the weight and the scale companion slab s reads.
func (s *slab) ranges(m *Module) {
	_, rowBytes := rowsOf(m)
	if m.Weight.ByteSize() > 0 {
		s.wOff, s.wLen = int64(s.r0)*rowBytes, int64(s.r1-s.r0)*rowBytes
	}
	if m.Scale != nil {
		sr0, sr1 := scaleRange(m, s.r0, s.r1)
		srow := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
		s.sOff, s.sLen = sr0*srow, (sr1-sr0)*srow
	}
}

// slabResult holds what one slab measured, per output (indexed like outputKinds).
type slabResult struct {
	outs []outResult
}

// rowsOf returns the number of rows a module is cut into and the bytes per row of its weight.
func rowsOf(m *Module) (rows int, rowBytes int64) {
	if m.Linear {
		return m.Rows, m.Weight.ByteSize() / int64(max(m.Rows, 1))
	}
	if len(m.Weight.Shape) >= 1 && m.Weight.Shape[0] > 0 {
		return int(m.Weight.Shape[0]), m.Weight.ByteSize() / m.Weight.Shape[0]
	}
	return 1, m.Weight.ByteSize()
}

// slabElems is the number of weights per slab: 4 Mi elements (16 MiB as float32) keeps every
// worker busy on GLM-5-sized experts while bounding memory.
const slabElems = 4 << 20

// slabRows returns the rows per slab for module m; Linear modules use multiples of the FP8 block.
func slabRows(m *Module) int {
	rows, _ := rowsOf(m)
	cols := max(m.Cols, 1)
	if !m.Linear {
		if len(m.Weight.Shape) >= 1 && m.Weight.Shape[0] > 0 {
			cols = int(m.Weight.NumElements() / m.Weight.Shape[0])
		}
		return max(1, min(rows, slabElems/max(cols, 1)))
	}
	if m.Calib != nil && m.Calib.Method == CalibGPTQ {
		return max(1, rows) // one factorization per module: GPTQ takes the whole weight
	}
	n := max(FP8BlockSize, (slabElems/cols)/FP8BlockSize*FP8BlockSize)
	return max(1, min(rows, n))
}

// scaleRange returns the rows of the FP8 scale tensor that cover weight rows [r0, r1).
func scaleRange(m *Module, r0, r1 int) (int64, int64) {
	if m.Scale == nil {
		return 0, 0
	}
	if isChannelScale(m) {
		return int64(r0), int64(r1)
	}
	return int64(r0) / FP8BlockSize, ceilDiv(int64(r1), FP8BlockSize)
}

// decodeSource turns a slab's source bytes into float32 values on backend be (nil: the CPU).
func decodeSource(be kernels.Backend, dst []float32, m *Module, s *slab) error {
	w := m.Weight
	if m.Packed != nil {
		return decodePacked(dst, m, s)
	}
	if m.Scale == nil {
		return quantize.DecodeDense(dst, s.raw, w.DType)
	}
	sr0, sr1 := scaleRange(m, s.r0, s.r1)
	scale := make([]float32, (sr1-sr0)*int64(scaleCols(m)))
	if err := safetensors.DecodeFloat32(scale, s.scaleRaw, m.Scale.DType); err != nil {
		return fmt.Errorf("tensor %q: %w", m.Scale.Name, err)
	}
	if err := checkScales(m, scale, sr0); err != nil {
		return err
	}
	rows, cols := s.r1-s.r0, m.Cols
	if isChannelScale(m) {
		return quantize.DecodeFP8Channel(dst, s.raw, scale, rows, cols)
	}
	// Block scales: FP8BlockSize x FP8BlockSize blocks (the plan refuses other block sizes); the
	// slab starts on a block row, so its scale rows are whole.
	return quantize.DecodeFP8BlockOn(be, dst, s.raw, scale, []int64{sr1 - sr0, int64(scaleCols(m))}, rows, cols)
}

// checkScales refuses FP8 dequantization scales that are not positive finite numbers: a zero,
// negative or NaN weight_scale_inv would silently zero, flip or poison a whole block. first is
// the scale row of scale[0]; the error names the tensor and the block.
func checkScales(m *Module, scale []float32, first int64) error {
	cols := int64(scaleCols(m))
	for i, v := range scale {
		if !(v > 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("tensor %q: %w: %v at block [%d, %d] (an FP8 scale must be a positive finite number)",
				m.Scale.Name, quantize.ErrBadScale, v, first+int64(i)/cols, int64(i)%cols)
		}
	}
	return nil
}

// isChannelScale reports a per-output-channel FP8 scale ([N, 1] or [N]).
func isChannelScale(m *Module) bool {
	s := m.Scale.Shape
	return len(s) >= 1 && s[0] == int64(m.Rows) && (len(s) == 1 || s[1] == 1) && m.Rows != 1
}

func scaleCols(m *Module) int {
	if len(m.Scale.Shape) == 2 {
		return int(m.Scale.Shape[1])
	}
	return 1
}

// grow returns b with length n, reusing its storage when large enough (the contents are
// whatever was there: every caller overwrites them).
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// rawBufs keeps a run's slab read buffers for reuse: a run reads hundreds of gigabytes through
// a few dozen buffers instead of allocating (and faulting in, clearing and collecting) each one.
// Unlike a sync.Pool it keeps them across garbage collections and hands out the best fit of all
// it holds; it holds at most maxIdleRaw of them and maxIdleRawBytes, so memory does not pile up
// when slab sizes change (what is in flight is bounded by the run's memory budget; this is the
// fixed overhead beside it).
type rawBufs struct {
	mu    sync.Mutex
	idle  [][]byte
	bytes int // the capacity of idle
}

// maxIdleRaw and maxIdleRawBytes bound the buffers a rawBufs keeps unused: the reader, the
// workers' queue and the copier's hold about a dozen slabs at once.
const (
	maxIdleRaw      = 16
	maxIdleRawBytes = 64 << 20
)

// get returns a buffer of n bytes whose address is congruent to off modulo the direct I/O
// alignment (fsutil.AlignedLike), and the pooled buffer it lies in.
func (p *rawBufs) get(n, off int64) (buf, base []byte) {
	want := int(n) + fsutil.DirectAlign
	p.mu.Lock()
	best := -1
	for i, b := range p.idle {
		if cap(b) >= want && (best < 0 || cap(b) < cap(p.idle[best])) {
			best = i
		}
	}
	if best >= 0 {
		base = p.idle[best][:want]
		p.bytes -= cap(base)
		p.idle = slices.Delete(p.idle, best, best+1)
	}
	p.mu.Unlock()
	if base == nil {
		base = make([]byte, want)
	}
	return fsutil.AlignedLike(base, off, int(n)), base
}

// put returns a buffer no longer referenced; beyond the bounds the smallest idle buffers are
// dropped.
func (p *rawBufs) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, b)
	p.bytes += cap(b)
	for len(p.idle) > maxIdleRaw || p.bytes > maxIdleRawBytes && len(p.idle) > 1 {
		small := 0
		for i, x := range p.idle {
			if cap(x) < cap(p.idle[small]) {
				small = i
			}
		}
		p.bytes -= cap(p.idle[small])
		p.idle = slices.Delete(p.idle, small, small+1)
	}
}
