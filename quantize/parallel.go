package quantize

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// chunkElems is the target number of elements per unit of parallel work.
const chunkElems = 1 << 16

// forChunks calls fn(lo, hi) for consecutive ranges of [0, n) of size step (the last one
// shorter), on up to workers goroutines (GOMAXPROCS when workers <= 0). It returns the error of
// the lowest range that failed, so the error does not depend on scheduling, or the context's
// error when it is cancelled first. Ranges after a failed one are skipped.
func forChunks(ctx context.Context, n, step, workers int, fn func(lo, hi int) error) error {
	if n <= 0 {
		return ctx.Err()
	}
	step = max(step, 1)
	chunks := (n + step - 1) / step
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, chunks)
	errs := make([]error, chunks)
	var next atomic.Int64
	var failed atomic.Int64
	failed.Store(int64(chunks))
	run := func() {
		for {
			c := next.Add(1) - 1
			if c >= int64(chunks) || c > failed.Load() {
				return
			}
			err := ctx.Err()
			if err == nil {
				lo := int(c) * step
				err = fn(lo, min(n, lo+step))
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
