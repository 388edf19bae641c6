package publish

import (
	"context"
	"sync"
)

// forEach runs fn for 0..n-1 on up to parallel goroutines. The first error cancels the context
// given to the others and is returned, unless ctx itself was cancelled: then ctx's error is.
// Unlike par.ForEach the first error in time wins: the others are mostly the cancellation it
// caused.
func forEach(ctx context.Context, n, parallel int, fn func(ctx context.Context, i int) error) error {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	work := make(chan int)
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range work {
				if err := fn(gctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case work <- i:
		case <-gctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	// A cancelled ctx may have left items unstarted: that is never success.
	if err := ctx.Err(); err != nil {
		return err
	}
	return firstErr
}
