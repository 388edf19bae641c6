//go:build cuda

package cuda

import (
	"fmt"
	"runtime"

	"gorgonia.org/cu"
)

// job describes one call split into chunks. For chunk i: stage fills the pinned input (in
// bytes), launch enqueues the kernels reading din and writing dout on stream s, and finish
// reads the pinned output once the chunk's copy out is complete. Chunks alternate between the
// slot's two streams: while the GPU copies and computes chunk i, the host stages chunk i+1 and
// finishes chunk i-1. finish is called in chunk order, so the first error is the first chunk's.
type job struct {
	chunks int
	sizes  func(i int) (in, out int)
	stage  func(i int, in []byte)
	launch func(i int, s cu.Stream, din, dout cu.DevicePtr) error
	finish func(i int, out []byte) error
}

// run executes j on a free slot.
func (b *Backend) run(j job) error {
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
		return j.finish(i, sl.sets[k].hout.bytes(outLen[k]))
	}
	// drainAll waits for both streams (oldest chunk first) so that no copy still uses a buffer.
	drainAll := func(next int) error {
		err := drain(next & 1)
		if e := drain((next + 1) & 1); err == nil {
			err = e
		}
		return err
	}
	for i := range j.chunks {
		k := i & 1
		if err := drain(k); err != nil {
			_ = drainAll(i + 1)
			return err
		}
		in, out := j.sizes(i)
		set := &sl.sets[k]
		s := sl.streams[k]
		err := set.hin.ensure(in)
		if err == nil {
			err = set.hout.ensure(out)
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
		j.stage(i, set.hin.bytes(in))
		if in > 0 {
			err = cu.MemcpyHtoDAsync(set.din.p, set.hin.p, int64(in), s)
		}
		if err == nil {
			err = j.launch(i, s, set.din.p, set.dout.p)
		}
		if err == nil && out > 0 {
			err = cu.MemcpyDtoHAsync(set.hout.p, set.dout.p, int64(out), s)
		}
		if err != nil {
			_ = s.Synchronize()
			_ = drainAll(i + 1)
			return fmt.Errorf("cuda: chunk %d: %w", i, err)
		}
		pending[k], outLen[k] = i, out
	}
	return drainAll(j.chunks)
}

// rowsPerChunk returns how many rows of rowBytes (float32 bytes) make one chunk, at least one
// and a multiple of align.
func rowsPerChunk(rows, rowBytes, align int) int {
	n := max(1, chunkBytes/max(rowBytes, 1))
	n = max(align, n/align*align)
	return min(n, max(rows, 1))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
