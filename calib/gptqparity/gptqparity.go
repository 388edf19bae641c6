//go:build cuda || cudaemu

// Package gptqparity holds the parity cases of GPTQ on a device: calib's CPU factorization and
// column loop are their specification, so they live beside calib, above the kernels, whose
// packages import nothing of the pipeline. Its tests run them on the emulated device (make
// test-cuda-emu).
package gptqparity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"pdq/calib"
	"pdq/internal/floatcodec"
	"pdq/kernels/cuda/parity"
)

// Cases returns the parity cases of GPTQ on the device: calib.Factorize and
// Factor.Quantize with GPTQOptions.Device set against the CPU, for several K (one, two and
// three factorization blocks, a partial one), column blocks of 128, 48 and 200 (a product over
// two inner blocks), activation order, zero columns and zero-scale groups, Hessians that need
// retries with more dampening and one that never factorizes. N, the retries, the levels and
// the clipped count must be identical.
func Cases() []parity.ParityCase {
	type tc struct {
		name        string
		k, rows, g  int
		bs          int
		actOrder    bool
		indefinite  float64 // > 0: an indefinite Hessian with these off-diagonal pairs
		zeroColumns bool
	}
	cases := []tc{
		{name: "k64/g32", k: 64, rows: 37, g: 32},
		{name: "k256/g128/act-order", k: 256, rows: 21, g: 128, actOrder: true},
		{name: "k320/g64/zero-columns", k: 320, rows: 40, g: 64, zeroColumns: true},
		{name: "k320/g32/bs48", k: 320, rows: 9, g: 32, bs: 48},
		{name: "k448/g64/bs200/act-order", k: 448, rows: 13, g: 64, bs: 200, actOrder: true},
		{name: "k64/retries", k: 64, rows: 5, g: 32, indefinite: 1.5},
		{name: "k64/ill-conditioned", k: 64, rows: 5, g: 32, indefinite: 50},
	}
	var cs []parity.ParityCase
	for _, c := range cases {
		cs = append(cs, parity.ParityCase{Name: "gptq/" + c.name, Run: func(b parity.Backend, rng *rand.Rand) error {
			dev, ok := b.(calib.Device)
			if !ok {
				return errors.New("the backend runs no GPTQ")
			}
			h := hessian(rng, c.k, c.indefinite, c.zeroColumns)
			o := calib.GPTQOptions{BlockSize: c.bs, ActOrder: c.actOrder}
			return gptqParity(dev, h, c.k, c.rows, c.g, o, rng)
		}})
	}
	return cs
}

// hessian returns a K×K Hessian XᵀX/T of correlated inputs with per-column gains, or an
// indefinite one (unit diagonal, pairs coupled by off) when off > 0.
func hessian(rng *rand.Rand, k int, off float64, zeroColumns bool) []float64 {
	h := make([]float64, k*k)
	if off > 0 {
		for i := range k {
			h[i*k+i] = 1
		}
		for i := 0; i+1 < k; i += 2 {
			h[i*k+i+1], h[(i+1)*k+i] = off, off
		}
		return h
	}
	t := 2 * k
	gain := make([]float64, k)
	for j := range gain {
		gain[j] = math.Exp(rng.NormFloat64())
		if zeroColumns && j%37 == 5 {
			gain[j] = 0
		}
	}
	x := make([]float64, t*k)
	for r := range t {
		common := rng.NormFloat64()
		for j := range k {
			x[r*k+j] = gain[j] * (rng.NormFloat64() + 0.5*common)
		}
	}
	for i := range k {
		for j := range k {
			var s float64
			for r := range t {
				s += x[r*k+i] * x[r*k+j]
			}
			h[i*k+j] = s / float64(t)
		}
	}
	return h
}

// gptqParity factorizes h and quantizes random weights on the CPU and on dev.
func gptqParity(dev calib.Device, h []float64, k, rows, g int, o calib.GPTQOptions, rng *rand.Rand) error {
	ctx := context.Background()
	want, ew := calib.Factorize(ctx, h, k, o)
	o.Device = dev
	got, eg := calib.Factorize(ctx, h, k, o)
	if ew != nil || eg != nil {
		if ew == nil || eg == nil || !errors.Is(eg, calib.ErrIllConditioned) || ew.Error() != eg.Error() {
			return fmt.Errorf("factorize: cpu %v, device %v", ew, eg)
		}
		return nil
	}
	if !slices.Equal(want.Perm, got.Perm) || want.Tries != got.Tries || want.Damp != got.Damp {
		return fmt.Errorf("factor: cpu tries %d damp %g, device tries %d damp %g (or the orders differ)", want.Tries, want.Damp, got.Tries, got.Damp)
	}
	if !slices.EqualFunc(want.N, got.N, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		i := 0
		for math.Float32bits(want.N[i]) == math.Float32bits(got.N[i]) {
			i++
		}
		return fmt.Errorf("N differs at %d (row %d, column %d): cpu %v, device %v", i, i/k, i%k, want.N[i], got.N[i])
	}
	w := make([]float32, rows*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	ng := k / g
	scales := make([]float32, rows*ng)
	for r := range rows {
		for q := range ng {
			grp := w[r*k+q*g : r*k+(q+1)*g]
			if (r+q)%11 == 3 {
				clear(grp) // a zero group: scale 0, levels 0
				continue
			}
			var m float32
			for _, v := range grp {
				m = max(m, float32(math.Abs(float64(v))))
			}
			scales[r*ng+q] = floatcodec.RoundBF16(m / 7 * 0.8) // some levels clip
		}
	}
	pw, pg := make([]byte, rows*k/2), make([]byte, rows*k/2)
	cw, ew := want.Quantize(ctx, pw, w, rows, scales, g)
	cg, eg := got.Quantize(ctx, pg, w, rows, scales, g)
	if ew != nil || eg != nil {
		return fmt.Errorf("quantize: cpu %v, device %v", ew, eg)
	}
	if cw != cg {
		return fmt.Errorf("clipped: cpu %d, device %d", cw, cg)
	}
	if !bytes.Equal(pw, pg) {
		i := 0
		for pw[i] == pg[i] {
			i++
		}
		return fmt.Errorf("levels differ from byte %d (row %d) of %d", i, 2*i/k, len(pw))
	}
	return nil
}
