// Package par runs independent work items on a bounded number of goroutines with a
// deterministic outcome: the error returned is that of the lowest-numbered item that failed,
// whatever the scheduling, so a run's message does not depend on timing.
package par

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// ForEach calls fn(i) for i in [0, n) on up to workers goroutines (GOMAXPROCS when workers <= 0).
// Items after a failed one are skipped (those already running finish). It returns the error of
// the lowest item that failed, or the context's error when it is cancelled first.
func ForEach(ctx context.Context, n, workers int, fn func(i int) error) error {
	if n <= 0 {
		return ctx.Err()
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	errs := make([]error, n)
	var next, failed atomic.Int64
	failed.Store(int64(n))
	run := func() {
		for {
			c := next.Add(1) - 1
			if c >= int64(n) || c > failed.Load() {
				return
			}
			err := ctx.Err()
			if err == nil {
				err = fn(int(c))
			}
			if err != nil {
				errs[c] = err
				for {
					f := failed.Load()
					if c >= f || failed.CompareAndSwap(f, c) {
						break
					}
				}
				return
			}
		}
	}
	if workers == 1 {
		run()
	} else {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(run)
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Chunks calls fn(lo, hi) for consecutive ranges of [0, n) of size step (the last one shorter),
// as ForEach does for items.
func Chunks(ctx context.Context, n, step, workers int, fn func(lo, hi int) error) error {
	step = max(step, 1)
	return ForEach(ctx, (n+step-1)/step, workers, func(c int) error {
		lo := c * step
		return fn(lo, min(n, lo+step))
	})
}

// Sem bounds how many holders run at once (a counting semaphore whose wait can be cancelled).
type Sem chan struct{}

// NewSem returns a semaphore of n slots (at least 1).
func NewSem(n int) Sem { return make(Sem, max(n, 1)) }

// Acquire waits for a slot or for ctx to end (then it holds nothing and returns ctx's error).
func (s Sem) Acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release frees a slot taken by Acquire.
func (s Sem) Release() { <-s }
