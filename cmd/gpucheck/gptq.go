//go:build cuda

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"pdq/calib"
	"pdq/kernels/cuda"
	"pdq/safetensors"
)

// gptqBench runs GPTQ on a routed expert's shape (rows × k) on the CPU and on the device,
// requires identical levels, and prints both times: the factorization (Factorize) and the
// column loop (Factor.Quantize) apart.
func gptqBench(w io.Writer, dev *cuda.Multi, rows, k int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	// An SPD Hessian at little cost: a positive diagonal plus a sum of 16 rank-one terms.
	h := make([]float64, k*k)
	for r := 0; r < 16; r++ {
		u := make([]float64, k)
		for i := range u {
			u[i] = rng.NormFloat64() * math.Exp(rng.NormFloat64()/2)
		}
		for i := range k {
			for j := range k {
				h[i*k+j] += u[i] * u[j]
			}
		}
	}
	for i := range k {
		h[i*k+i] += 0.1 + rng.Float64()
	}
	wts := make([]float32, rows*k)
	for i := range wts {
		wts[i] = float32(rng.NormFloat64() * 0.02)
	}
	const g = 32
	scales := make([]float32, rows*k/g)
	for i := range scales {
		var m float32
		for _, v := range wts[i*g : (i+1)*g] {
			m = max(m, float32(math.Abs(float64(v))))
		}
		scales[i] = safetensors.RoundBF16(m / 7)
	}
	ctx := context.Background()
	fmt.Fprintf(w, "\nGPTQ of %dx%d (group %d, act order), CPU against the device:\n", rows, k, g)
	var packed [2][]byte
	for i, d := range []calib.Device{nil, dev} {
		o := calib.GPTQOptions{ActOrder: true, Device: d}
		t0 := time.Now()
		f, err := calib.Factorize(ctx, h, k, o)
		if err != nil {
			return err
		}
		t1 := time.Now()
		packed[i] = make([]byte, rows*k/2)
		if _, err := f.Quantize(ctx, packed[i], wts, rows, scales, g); err != nil {
			return err
		}
		t2 := time.Now()
		fmt.Fprintf(w, "  %-6s factorize %8.1f ms   column loop %8.1f ms\n", []string{"cpu", "device"}[i],
			t1.Sub(t0).Seconds()*1e3, t2.Sub(t1).Seconds()*1e3)
	}
	if !bytes.Equal(packed[0], packed[1]) {
		return fmt.Errorf("GPTQ levels of the device differ from the CPU's")
	}
	fmt.Fprintln(w, "  levels: byte-identical")
	return nil
}
