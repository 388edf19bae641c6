package quantize

import (
	"context"

	"pdq/internal/par"
)

// chunkElems is the target number of elements per unit of parallel work.
const chunkElems = 1 << 16

// forChunks calls fn(lo, hi) for consecutive ranges of [0, n) of size step on up to workers
// goroutines; the error is the lowest failing range's (par.Chunks).
func forChunks(ctx context.Context, n, step, workers int, fn func(lo, hi int) error) error {
	return par.Chunks(ctx, n, step, workers, fn)
}
