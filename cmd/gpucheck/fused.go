//go:build cuda

package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"pdq/kernels"
	"pdq/kernels/cuda"
	"pdq/kernels/cuda/host"
	"pdq/safetensors"
)

// fusedBench times the fused pass end to end, host copies included, on BF16 slabs of a routed
// expert's shape (2048×7168, 28 MiB of source each) from several goroutines at once, as the
// conversion's workers call it, for rtn and mse: source GB/s against the host-to-device copy.
func fusedBench(w io.Writer, b *cuda.Multi, gib float64, seed uint64) error {
	const rows, cols = 2048, 7168
	rng := rand.New(rand.NewPCG(seed, 99))
	raw := make([]byte, 2*rows*cols)
	for i := range rows * cols {
		binary.LittleEndian.PutUint16(raw[2*i:], safetensors.Float32ToBF16(float32(rng.NormFloat64()*0.02)))
	}
	slabs := max(1, int(gib*(1<<30))/len(raw))
	const workers = 8
	fmt.Fprintf(w, "\nfused pass, end to end (pinned staging, two streams per call, %d workers): %d BF16 slabs of %dx%d\n", workers, slabs, rows, cols)
	for _, search := range []kernels.Search{kernels.SearchRTN, kernels.SearchMSE} {
		p, err := kernels.NewInt4Params(32, search, false)
		if err != nil {
			return err
		}
		outs := make([]host.FusedOut, workers)
		for i := range outs {
			n := rows * cols
			outs[i] = host.FusedOut{
				Int4:      kernels.Int4Out{Packed: make([]byte, n/2), Scales: make([]byte, 2*n/32), Stats: make([]kernels.GroupStats, n/32)},
				FP8Codes:  make([]byte, n),
				FP8Scales: make([]float32, rows/128*cols/128),
			}
		}
		src := host.FusedSource{Raw: raw, DType: kernels.BF16, Rows: rows, Cols: cols}
		next := make(chan int, slabs)
		for i := range slabs {
			next <- i
		}
		close(next)
		var wg sync.WaitGroup
		errs := make([]error, workers)
		start := time.Now()
		for k := range workers {
			wg.Go(func() {
				for range next {
					if err := b.Fused(&outs[k], src, &p, 0); err != nil && errs[k] == nil {
						errs[k] = err
					}
				}
			})
		}
		wg.Wait()
		sec := time.Since(start).Seconds()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "  int4 %s g32 + fp8 blocks + both error sums: %.2f s, %.1f GB/s of BF16 source\n",
			[]string{"rtn", "mse"}[search], sec, float64(slabs*len(raw))/sec/1e9)
	}
	return nil
}
