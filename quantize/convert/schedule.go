package convert

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"pdq/kernels"
)

// convert streams the source through the workers.
func (r *runner) convert(ctx context.Context) error {
	p := r.plan
	r.results = make([][]slabResult, len(p.Modules))
	r.left = make([]atomic.Int32, len(p.Modules))
	r.emits = make([][2]bool, len(p.Modules))
	var slabs []*slab
	for mi, m := range p.Modules {
		r.emits[mi] = [2]bool{r.pending(r.prefill, m), r.pending(r.decode, m)}
		if r.emits[mi] == [2]bool{} {
			continue // every tensor of m is in a shard finished earlier or written by another part
		}
		rows, _ := rowsOf(m)
		step := slabRows(m)
		n := 0
		for r0 := 0; r0 < rows || (rows == 0 && n == 0); r0 += step {
			slabs = append(slabs, &slab{mi: mi, si: n, r0: r0, r1: min(rows, r0+step)})
			n++
			if rows == 0 {
				break
			}
		}
		r.results[mi] = make([]slabResult, n)
		r.left[mi].Store(int32(n))
		r.total += m.Weight.ByteSize() // what slabDone counts: weight rows, not scale companions
		r.factors.plan(m)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *slab, r.ro.Workers)
	var wg sync.WaitGroup
	for range r.ro.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{r: r, backend: r.ro.Backend, null: r.ro.Backend == kernels.Backend(kernels.Null{})}
			for s := range work {
				err := wk.process(ctx, s)
				putRaw(s.raw)
				s.raw, s.scaleRaw = nil, nil
				if err == nil {
					err = r.slabDone(s)
				}
				r.budget.release(s.cost)
				if err != nil {
					cancel(err)
				}
			}
		}()
	}
	err := r.read(ctx, slabs, work)
	close(work)
	wg.Wait()
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

// read is the single reader: it reads slabs in file order within the memory budget.
func (r *runner) read(ctx context.Context, slabs []*slab, work chan<- *slab) error {
	src := r.plan.Source
	for _, s := range slabs {
		m := r.plan.Modules[s.mi]
		_, rowBytes := rowsOf(m)
		n := int64(s.r1-s.r0) * rowBytes
		if m.Weight.ByteSize() == 0 {
			n = 0
		}
		elems := int64(s.r1-s.r0) * int64(max(m.Cols, 1))
		s.cost = 2*n + 16*elems + gptqWorkBytes(m)
		if err := r.budget.acquire(ctx, s.cost); err != nil {
			return err
		}
		s.raw = getRaw(n)
		if err := src.ReadTensorAt(m.Weight, s.raw, int64(s.r0)*rowBytes); err != nil {
			r.budget.release(s.cost)
			return fmt.Errorf("convert: read %s: %w", m.describe(), err)
		}
		if m.Scale != nil {
			sr0, sr1 := scaleRange(m, s.r0, s.r1)
			srow := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
			s.scaleRaw = make([]byte, (sr1-sr0)*srow)
			if err := src.ReadTensorAt(m.Scale, s.scaleRaw, sr0*srow); err != nil {
				r.budget.release(s.cost)
				return fmt.Errorf("convert: read %s: %w", m.describe(), err)
			}
		}
		select {
		case work <- s:
		case <-ctx.Done():
			r.budget.release(s.cost)
			return ctx.Err()
		}
	}
	return nil
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
	for _, set := range []*shardSet{r.prefill, r.decode} {
		if set == nil {
			continue
		}
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
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n bytes fit (a single request larger than the limit runs alone).
func (b *budget) acquire(ctx context.Context, n int64) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+n > b.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err // nothing acquired: the caller releases nothing
	}
	b.used += n
	return nil
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}
