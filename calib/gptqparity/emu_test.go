//go:build cudaemu

package gptqparity

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"pdq/kernels/cuda/emu"
)

// TestParityEmulated runs the GPTQ cases on the host-compiled CUDA kernels, on one emulated
// device and on three served as one backend. The seed is fresh each run and logged;
// PDQ_SEED=<n> repeats a run.
func TestParityEmulated(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PDQ_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PDQ_SEED=%d repeats it)", seed, seed)
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("devices=%d", n), func(t *testing.T) {
			d, err := emu.NewDevices(n, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for i, c := range Cases() {
				t.Run(c.Name, func(t *testing.T) {
					if err := c.Run(d, rand.New(rand.NewPCG(seed, uint64(i)))); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}
