//go:build cuda

package cuda

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"pdq/kernels"
	"pdq/kernels/cuda/host"
	"pdq/kernels/cuda/parity"
)

// TestParity runs the parity suite and the fused pass's cases against kernels.CPU on every
// visible GPU (calls dealt round them). Without a usable driver or GPU it fails: this test is
// for GPU machines. The seed is fresh each run and logged; PDQ_SEED=<n> repeats a run.
func TestParity(t *testing.T) {
	b, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PDQ_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("device %s, seed %d (PDQ_SEED=%d repeats it)", b.DeviceName(), seed, seed)
	for i, c := range append(parity.ParityCases(), host.FusedCases()...) {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(b, rand.New(rand.NewPCG(seed, uint64(i)))); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("calls served per device: %v", b.Served())
}

// BenchmarkQuantizeInt4 measures one 16 MiB slab (the conversion's slab size) end to end,
// host copies included.
func BenchmarkQuantizeInt4(b *testing.B) {
	be, err := New(0)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	rows, cols := 2048, 2048
	x := parity.Normal(rand.New(rand.NewPCG(1, 2)), rows*cols)
	for _, s := range []kernels.Search{kernels.SearchRTN, kernels.SearchMSE} {
		p, err := kernels.NewInt4Params(32, s, false)
		if err != nil {
			b.Fatal(err)
		}
		out := parity.NewInt4Out(rows, cols, 32)
		b.Run([]string{"rtn", "mse"}[s], func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			b.ReportAllocs()
			for b.Loop() {
				if err := be.QuantizeInt4(out, x, rows, cols, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
