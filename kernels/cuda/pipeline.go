//go:build cuda

package cuda

import (
	"fmt"
	"runtime"

	"gorgonia.org/cu"

	"pdq/kernels/cuda/host"
)

// Run implements host.Runner: it executes j on a free slot, chunks alternating between the
// slot's two streams: while the GPU copies and computes chunk i, the host stages chunk i+1
// and finishes chunk i-1.
func (b *Backend) Run(j host.Job) error {
	sl := <-b.slots
	defer func() { b.slots <- sl }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.Current(); err != nil {
		return err
	}
	pending := [2]int{-1, -1}
	outLen := [2]int{}
	drain := func(k int) error {
		i := pending[k]
		if i < 0 {
			return nil
		}
		pending[k] = -1
		if err := sl.streams[k].Synchronize(); err != nil {
			return fmt.Errorf("cuda: chunk %d: %w", i, err)
		}
		return j.Finish(i, sl.sets[k].hout.bytes(outLen[k]))
	}
	// drainAll waits for both streams (oldest chunk first) so that no copy still uses a buffer.
	drainAll := func(next int) error {
		err := drain(next & 1)
		if e := drain((next + 1) & 1); err == nil {
			err = e
		}
		return err
	}
	for i := range j.Chunks {
		k := i & 1
		if err := drain(k); err != nil {
			_ = drainAll(i + 1)
			return err
		}
		in, out := j.Sizes(i)
		back := j.BackBytes(i, out)
		set := &sl.sets[k]
		s := sl.streams[k]
		err := set.hin.ensure(in)
		if err == nil {
			err = set.hout.ensure(back)
		}
		if err == nil {
			err = set.din.ensure(in)
		}
		if err == nil {
			err = set.dout.ensure(out)
		}
		if err != nil {
			_ = drainAll(i + 1)
			return err
		}
		j.Stage(i, set.hin.bytes(in))
		if in > 0 {
			err = cu.MemcpyHtoDAsync(set.din.p, set.hin.p, int64(in), s)
		}
		if err == nil {
			err = j.Launch(i, stream{b, s}, uint64(set.din.p), uint64(set.dout.p))
		}
		if err == nil && back > 0 {
			err = cu.MemcpyDtoHAsync(set.hout.p, set.dout.p, int64(back), s)
		}
		if err != nil {
			_ = s.Synchronize()
			_ = drainAll(i + 1)
			return fmt.Errorf("cuda: chunk %d: %w", i, err)
		}
		pending[k], outLen[k] = i, back
	}
	return drainAll(j.Chunks)
}
