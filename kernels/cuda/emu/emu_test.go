//go:build cudaemu

package emu

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"pdq/kernels/cuda/parity"
)

// TestParity runs the parity suite on the host-compiled CUDA kernels. The seed is fresh each
// run and logged; PDQ_SEED=<n> repeats a run.
func TestParity(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PDQ_SEED"), 10, 64); err == nil {
		seed = s
	}
	src, err := os.ReadFile("../../pdq.cu")
	if err != nil {
		t.Fatal(err)
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(src)); SourceSHA256() != sum {
		t.Fatalf("the emulated kernels were compiled from pdq.cu %s, the file is %s: run make test-cuda-emu", SourceSHA256(), sum)
	}
	t.Logf("seed %d (PDQ_SEED=%d repeats it)", seed, seed)
	b := New()
	defer b.Close()
	for i, c := range parity.ParityCases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(b, rand.New(rand.NewPCG(seed, uint64(i)))); err != nil {
				t.Fatal(err)
			}
		})
	}
}
