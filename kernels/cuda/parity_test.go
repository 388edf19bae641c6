//go:build cuda

package cuda

import (
	"math/rand/v2"
	"os"
	"pdq/kernels"
	"pdq/kernels/cuda/parity"
	"strconv"
	"testing"
	"time"
)

// TestParity runs the parity suite against kernels.CPU. It needs a GPU: the test binary cannot
// start without one (gorgonia.org/cu initializes the driver when the package loads). The seed
// is fresh each run and logged; PDQ_SEED=<n> repeats a run.
func TestParity(t *testing.T) {
	b, err := New(0)
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
	for i, c := range parity.ParityCases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(b, rand.New(rand.NewPCG(seed, uint64(i)))); err != nil {
				t.Fatal(err)
			}
		})
	}
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
