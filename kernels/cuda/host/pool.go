//go:build cuda || cudaemu

package host

import (
	"errors"
	"sync/atomic"

	"pdq/kernels"
)

// ErrNoDevices reports a Pool built from no devices.
var ErrNoDevices = errors.New("cuda: no devices for the pool")

// Pool serves several devices as one kernels.Backend: every call (a whole slab from the
// conversion's scheduler) goes to a device with a free slot, each device taking up to `slots`
// calls at once. The devices compute identical bytes, so the output does not depend on how many
// there are or which one served a slab.
type Pool struct {
	devs   []Ops
	free   chan int
	served []atomic.Int64
}

// Pool implements kernels.Backend.
var _ kernels.Backend = (*Pool)(nil)

// NewPool returns a pool of the devices ops, each serving up to slots calls at once.
func NewPool(slots int, ops ...Ops) (*Pool, error) {
	if len(ops) == 0 {
		return nil, ErrNoDevices
	}
	slots = max(slots, 1)
	p := &Pool{devs: ops, free: make(chan int, slots*len(ops)), served: make([]atomic.Int64, len(ops))}
	// Interleaved, so that calls in sequence go round the devices.
	for range slots {
		for d := range ops {
			p.free <- d
		}
	}
	return p, nil
}

// Devices returns the number of devices in the pool.
func (p *Pool) Devices() int { return len(p.devs) }

// Served returns how many calls each device has served.
func (p *Pool) Served() []int64 {
	n := make([]int64, len(p.served))
	for i := range n {
		n[i] = p.served[i].Load()
	}
	return n
}

// on runs f on a device with a free slot.
func (p *Pool) on(f func(o Ops)) {
	d := <-p.free
	defer func() { p.free <- d }()
	p.served[d].Add(1)
	f(p.devs[d])
}

// Name returns "cuda".
func (p *Pool) Name() string { return "cuda" }

// QuantizeInt4 implements kernels.Backend on one of the devices.
func (p *Pool) QuantizeInt4(out kernels.Int4Out, src []float32, rows, cols int, q *kernels.Int4Params) (err error) {
	p.on(func(o Ops) { err = o.QuantizeInt4(out, src, rows, cols, q) })
	return err
}

// DequantizeInt4 implements kernels.Backend on one of the devices.
func (p *Pool) DequantizeInt4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) (err error) {
	p.on(func(o Ops) { err = o.DequantizeInt4(dst, packed, scales, rows, cols, groupSize) })
	return err
}

// QuantizeFP8Block implements kernels.Backend on one of the devices.
func (p *Pool) QuantizeFP8Block(codes []byte, scaleInv []float32, src []float32, rows, cols int) (err error) {
	p.on(func(o Ops) { err = o.QuantizeFP8Block(codes, scaleInv, src, rows, cols) })
	return err
}

// DequantizeFP8Block implements kernels.Backend on one of the devices.
func (p *Pool) DequantizeFP8Block(dst []float32, codes []byte, scale []float32, rows, cols, bh, bw int) (err error) {
	p.on(func(o Ops) { err = o.DequantizeFP8Block(dst, codes, scale, rows, cols, bh, bw) })
	return err
}

// ErrorSums implements kernels.Backend with the CPU loop (see Ops.ErrorSums).
func (p *Pool) ErrorSums(ref, got []float32, base int64) kernels.ErrSums {
	return kernels.CPU{}.ErrorSums(ref, got, base)
}

// ErrorSumsChunked is Ops.ErrorSumsChunked on one of the devices.
func (p *Pool) ErrorSumsChunked(ref, got []float32, base int64) (s kernels.ErrSums, err error) {
	p.on(func(o Ops) { s, err = o.ErrorSumsChunked(ref, got, base) })
	return s, err
}

// DecodeDense is Ops.DecodeDense on one of the devices.
func (p *Pool) DecodeDense(dst []float32, src []byte, dt kernels.DType) (err error) {
	p.on(func(o Ops) { err = o.DecodeDense(dst, src, dt) })
	return err
}
