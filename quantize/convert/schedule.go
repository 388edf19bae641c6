package convert

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"pdq/internal/fsutil"
	"pdq/kernels"
	"pdq/safetensors"
)

// convert streams the source through the workers.
func (r *runner) convert(ctx context.Context) error {
	p := r.plan
	r.results = make([][]slabResult, len(p.Modules))
	r.left = make([]atomic.Int32, len(p.Modules))
	r.emits = make([][]bool, len(p.Modules))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cp, err := r.newCopier(ctx)
	if err != nil {
		return err
	}
	var slabs []*slab
	for mi, m := range p.Modules {
		r.emits[mi] = make([]bool, len(outputKinds))
		copyOnly := true
		for k, set := range r.outs {
			r.emits[mi][k] = r.pending(set, m)
			copyOnly = copyOnly && !r.emits[mi][k]
		}
		if copyOnly && !cp.wants(m) {
			continue // every tensor of m is in a shard finished earlier or written by another part
		}
		rows, _ := rowsOf(m)
		step := slabRows(m)
		n := 0
		for r0 := 0; r0 < rows || (rows == 0 && n == 0); r0 += step {
			s := &slab{mi: mi, si: n, r0: r0, r1: min(rows, r0+step), copyOnly: copyOnly}
			s.ranges(m)
			if cp.wants(m) {
				cp.count(m, s)
			}
			slabs = append(slabs, s)
			n++
			if rows == 0 {
				break
			}
		}
		if copyOnly {
			continue // read for the prefill copy alone
		}
		r.results[mi] = make([]slabResult, n)
		outs := make([]outResult, n*len(outputKinds))
		for i := range r.results[mi] {
			r.results[mi][i].outs = outs[i*len(outputKinds) : (i+1)*len(outputKinds)]
		}
		r.left[mi].Store(int32(n))
		r.total += m.Weight.ByteSize() // what slabDone counts: weight rows, not scale companions
		r.factors.plan(m)
	}
	copied := make(chan struct{})
	if cp != nil {
		go func() {
			defer close(copied)
			cp.run(ctx, cancel)
		}()
	} else {
		close(copied)
	}
	work := make(chan *slab, r.ro.Workers)
	var wg sync.WaitGroup
	for range r.ro.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{r: r, backend: r.ro.Backend, null: r.ro.Backend == kernels.Backend(kernels.Null{})}
			for s := range work {
				err := wk.process(ctx, s)
				if err == nil {
					err = r.slabDone(s)
				}
				r.release(s)
				if err != nil {
					cancel(err)
				}
			}
		}()
	}
	err = r.read(ctx, slabs, work, cp)
	close(work)
	if cp != nil {
		close(cp.in)
	}
	wg.Wait()
	<-copied
	if err == nil && context.Cause(ctx) == nil && cp != nil && cp.unfinished() > 0 {
		err = fmt.Errorf("convert: internal: %d prefill copies unfinished after the last slab", cp.unfinished())
	}
	if err != nil || context.Cause(ctx) != nil {
		cp.abort()
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// read is the reader: it reads slabs in file order within the memory budget and hands each to a
// worker and, when its shard is copied to prefill/, to the copier cp. With RunOptions.Readers
// above one, that many goroutines take the slabs in turn, each once, and their memory budget in
// file order; the reads themselves overlap. One reader moves about 5.5 GB/s from the page cache
// here (BenchmarkReader), less than many cores quantize.
func (r *runner) read(ctx context.Context, slabs []*slab, work chan<- *slab, cp *copier) error {
	readers := min(r.ro.Readers, len(slabs))
	if readers <= 1 {
		for _, s := range slabs {
			if err := r.readSlab(ctx, s, -1, work, cp); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error // the first reader's error; the others then stop on ctx
	)
	for range readers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(slabs)); i = next.Add(1) - 1 {
				if err := r.readSlab(ctx, slabs[i], i, work, cp); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// readSlab reads slab s within the memory budget, taken at turn (see budget.acquireTurn), and
// hands it on (see read).
func (r *runner) readSlab(ctx context.Context, s *slab, turn int64, work chan<- *slab, cp *copier) error {
	src := r.plan.Source
	m := r.plan.Modules[s.mi]
	s.cost = s.wLen + s.sLen
	if !s.copyOnly {
		elems := int64(s.r1-s.r0) * int64(max(m.Cols, 1))
		s.cost = 2*s.wLen + 16*elems + gptqWorkBytes(m)
	}
	if err := r.budget.acquireTurn(ctx, s.cost, turn); err != nil {
		return err
	}
	// Aligned like its place in the file, so that the copier's write of it can bypass the
	// page cache.
	copying := cp.wants(m)
	s.raw, s.rawBase = r.raws.get(s.wLen, m.Weight.Offset()+s.wOff)
	var err error
	s.rawCRC, err = readTensor(src, m.Weight, s.raw, s.wOff, copying)
	if err == nil && m.Scale != nil {
		s.scaleRaw = make([]byte, s.sLen)
		s.scaleCRC, err = readTensor(src, m.Scale, s.scaleRaw, s.sOff, copying)
	}
	if err == nil && m.Packed != nil {
		err = r.readPacked(m, s)
	}
	if err != nil {
		r.raws.put(s.rawBase)
		r.budget.release(s.cost)
		return fmt.Errorf("convert: read %s: %w", m.describe(), err)
	}
	refs := int32(1)
	if copying && !s.copyOnly {
		refs = 2
	}
	s.refs.Store(refs)
	if copying {
		select {
		case cp.in <- s:
		case <-ctx.Done():
			for range refs {
				r.release(s)
			}
			return ctx.Err()
		}
	}
	if s.copyOnly {
		return nil
	}
	select {
	case work <- s:
	case <-ctx.Done():
		r.release(s)
		return ctx.Err()
	}
	return nil
}

// readChunk is the size of the reads of a slab whose bytes the copier writes too: the checksum
// of each is taken while it is still in the core's cache.
const readChunk = 1 << 20

// readTensor reads len(dst) bytes of t from off; with sum set it returns their CRC-32C, taken
// chunk by chunk as they arrive.
func readTensor(src *safetensors.Checkpoint, t *safetensors.Tensor, dst []byte, off int64, sum bool) (uint32, error) {
	if !sum {
		return 0, src.ReadTensorAt(t, dst, off)
	}
	var crc uint32
	for lo := 0; lo < len(dst); lo += readChunk {
		b := dst[lo:min(len(dst), lo+readChunk)]
		if err := src.ReadTensorAt(t, b, off+int64(lo)); err != nil {
			return 0, err
		}
		crc = fsutil.CombineCRC32C(crc, fsutil.UpdateCRC32C(0, b), int64(len(b)))
	}
	return crc, nil
}

// release drops one holder of slab s (a worker, the copier); the last one returns its buffer
// and its share of the memory budget.
func (r *runner) release(s *slab) {
	if s.refs.Add(-1) != 0 {
		return
	}
	r.raws.put(s.rawBase)
	s.raw, s.rawBase, s.scaleRaw, s.packed = nil, nil, nil, nil
	r.budget.release(s.cost)
}

// pending reports whether some output tensor of m lies in a shard of set that this run still
// writes; a module none of whose tensors is pending is not read at all.
func (r *runner) pending(set *shardSet, m *Module) bool {
	if set == nil {
		return false
	}
	for _, spec := range r.plan.OutputSpecs(m, set.out.Kind) {
		if !set.finished(spec.Name) {
			return true
		}
	}
	return false
}

// slabDone records progress and, after a module's last slab, its report rows and shard completions.
func (r *runner) slabDone(s *slab) error {
	m := r.plan.Modules[s.mi]
	_, rowBytes := rowsOf(m)
	done := r.done.Add(int64(s.r1-s.r0) * rowBytes)
	if r.ro.Progress != nil {
		r.ro.Progress(done, r.total, m.Weight.Name)
	}
	if r.left[s.mi].Add(-1) != 0 {
		return nil
	}
	r.moduleRecords(s.mi)
	for _, set := range r.sets() {
		for _, spec := range r.plan.OutputSpecs(m, set.out.Kind) {
			i, shardCRC, crc, err := set.complete(spec.Name)
			if err != nil {
				return err
			}
			if i >= 0 {
				if err := r.journalShard(set, i, shardCRC); err != nil {
					return err
				}
			}
			if crc != nil {
				if err := r.journalTensor(set, spec.Name, crc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// budget bounds the bytes in flight.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	used  int64
	turn  int64 // the next turn acquireTurn serves
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n bytes fit (a single request larger than the limit runs alone).
func (b *budget) acquire(ctx context.Context, n int64) error { return b.acquireTurn(ctx, n, -1) }

// acquireTurn is acquire for the request of turn turn (0, 1, 2, ...; -1: none), which is served
// only after those of every earlier turn: several readers then take the budget in slab order, as
// one reader does, so a large slab waiting for room is not overtaken by the small ones after it.
func (b *budget) acquireTurn(ctx context.Context, n, turn int64) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for turn >= 0 && b.turn != turn || b.used > 0 && b.used+n > b.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err // nothing acquired: the caller releases nothing
	}
	b.used += n
	if turn >= 0 {
		b.turn++
		b.cond.Broadcast()
	}
	return nil
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}
