//go:build cuda || cudaemu

// Package parity is the parity suite of the GPU backend: every method against kernels.CPU on
// fresh random data, outputs of both poisoned before each run, byte-identical results required.
// It runs on the CUDA backend (package tests and cmd/gpucheck, on a GPU machine) and on the
// host emulation of the same kernel source (package kernels/cuda/emu, on any machine).
package parity

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"pdq/kernels"
)

// Backend is what the suite checks: the kernels.Backend methods plus the GPU's extras.
type Backend interface {
	kernels.Backend
	// DecodeDense decodes BF16 or F16 source bytes like kernels.DecodeDense.
	DecodeDense(dst []float32, src []byte, dt kernels.DType) error
	// ErrorSumsChunked computes ErrorSums with chunked partial sums (see ErrSumsBound).
	ErrorSumsChunked(ref, got []float32, base int64) (kernels.ErrSums, error)
}

// ErrChunk is the number of consecutive elements summed sequentially into one partial sum by
// ErrorSumsChunked.
const ErrChunk = 256

// ErrSumsBound returns the largest difference ErrorSumsChunked may show against the CPU's
// sequential float64 sum of n terms whose absolute values add up to absSum. The CPU's sum is
// within (n-1)·u·absSum of the exact sum and the chunked one within (ErrChunk + n/ErrChunk)·u·
// absSum (u = 2^-53, first order; the factor 1.01 covers the higher-order terms).
func ErrSumsBound(n int, absSum float64) float64 {
	return 1.01 * float64(n+n/ErrChunk+ErrChunk+2) * 0x1p-53 * absSum
}

// ParityCase is one comparison of the suite.
type ParityCase struct {
	Name string
	Run  func(b Backend, rng *rand.Rand) error
}

// ParityCases returns the whole suite. Each case draws its data from the rng it is given.
func ParityCases() []ParityCase {
	var cs []ParityCase
	cs = append(cs, int4Cases()...)
	cs = append(cs, fp8Cases()...)
	cs = append(cs, otherCases()...)
	return cs
}

// dist names a way to draw weights.
type dist int

const (
	distNormal dist = iota // N(0, 0.02²)
	distHeavy              // Student-t like: normal / sqrt(uniform), a few huge values
	distZeros              // mostly zero groups, some normal ones
	distTiny               // magnitudes around 2^-70..2^-130 (tiny and subnormal scales)
	distTies               // multiples of 1/16 of powers of two: many exact .5 level ties
	distWide               // magnitudes from 2^-40 to 2^60 in one tensor
	distCount
)

func (d dist) String() string {
	return [...]string{"normal", "heavy", "zeros", "tiny", "ties", "wide"}[d]
}

// fill draws n weights of distribution d.
func fill(rng *rand.Rand, n int, d dist) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch d {
		case distNormal:
			x[i] = float32(rng.NormFloat64() * 0.02)
		case distHeavy:
			x[i] = float32(rng.NormFloat64() * 0.01 / math.Sqrt(rng.Float64()+1e-9))
		case distZeros:
			if (i/32)%4 != 3 {
				x[i] = 0
			} else {
				x[i] = float32(rng.NormFloat64())
			}
		case distTiny:
			x[i] = float32(rng.NormFloat64() * math.Ldexp(1, -70-rng.IntN(60)))
		case distTies:
			x[i] = float32(rng.IntN(33)-16) / 16 * float32(math.Ldexp(1, rng.IntN(8)-4))
		case distWide:
			x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(100)-40))
		}
	}
	return x
}

// StatsBytes views group statistics as their bytes.
func StatsBytes(s []kernels.GroupStats) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), int(unsafe.Sizeof(s[0]))*len(s))
}

// F32Bytes views float32 values as their (little-endian) bytes.
func F32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// poison fills b with a pattern no kernel writes by accident.
func poison(b []byte) {
	for i := range b {
		b[i] = 0xA5 ^ byte(i*7)
	}
}

// diffBytes reports the first difference between the CPU's (want) and the GPU's (got) bytes.
func diffBytes(what string, want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	for i := range want {
		if i >= len(got) || want[i] != got[i] {
			return fmt.Errorf("%s differ at byte %d of %d: cpu %#02x, cuda %#02x", what, i, len(want), want[i], got[i])
		}
	}
	return fmt.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
}

// sameErr requires both backends to fail the same way (or both to succeed).
func sameErr(want, got error) error {
	var w, g *kernels.NonFiniteError
	switch {
	case want == nil && got == nil:
		return nil
	case errors.As(want, &w) && errors.As(got, &g):
		if w.Index != g.Index || math.Float32bits(w.Value) != math.Float32bits(g.Value) {
			return fmt.Errorf("non-finite report: cpu %v, cuda %v", want, got)
		}
		return nil
	case errors.Is(want, kernels.ErrShape) && errors.Is(got, kernels.ErrShape):
		return nil
	}
	return fmt.Errorf("errors differ: cpu %v, cuda %v", want, got)
}

type int4Shape struct{ rows, cols, group int }

func int4Cases() []ParityCase {
	shapes := []int4Shape{
		{1, 32, 32}, {3, 96, 32}, {17, 2048, 32}, {5, 64, 64}, {33, 1536, 64},
		{2, 128, 128}, {9, 5120, 128}, {4, 8, 8}, {3, 24, 24}, {6, 7168, 7168}, {1, 40, 40},
		{0, 256, 32}, {4500, 1024, 32}, // the last one spans two pipeline chunks
	}
	type method struct {
		name   string
		search kernels.Search
		signed bool
	}
	methods := []method{{"rtn", kernels.SearchRTN, false}, {"mse", kernels.SearchMSE, false}, {"mse-signed", kernels.SearchMSE, true}}
	var cs []ParityCase
	for _, sh := range shapes {
		for _, m := range methods {
			for d := range distCount {
				if sh.rows*sh.cols > 1<<20 && d != distHeavy {
					continue // the big shape checks chunking; one distribution is enough
				}
				cs = append(cs, ParityCase{
					Name: fmt.Sprintf("int4/%s/g%d/%dx%d/%s", m.name, sh.group, sh.rows, sh.cols, d),
					Run: func(b Backend, rng *rand.Rand) error {
						p, err := kernels.NewInt4Params(sh.group, m.search, m.signed)
						if err != nil {
							return err
						}
						return int4Parity(b, fill(rng, sh.rows*sh.cols, d), sh.rows, sh.cols, &p)
					},
				})
			}
		}
	}
	cs = append(cs, ParityCase{Name: "int4/nonfinite", Run: int4NonFinite}, ParityCase{Name: "int4/shape", Run: int4BadShape})
	return cs
}

func newInt4Out(rows, cols, g int) kernels.Int4Out {
	n := rows * cols
	o := kernels.Int4Out{Packed: make([]byte, n/2), Scales: make([]byte, 2*(n/g)), Stats: make([]kernels.GroupStats, n/g)}
	poison(o.Packed)
	poison(o.Scales)
	poison(StatsBytes(o.Stats))
	return o
}

// int4Parity quantizes x on both backends and compares every output byte.
func int4Parity(b Backend, x []float32, rows, cols int, p *kernels.Int4Params) error {
	want, got := newInt4Out(rows, cols, p.GroupSize), newInt4Out(rows, cols, p.GroupSize)
	ew := kernels.CPU{}.QuantizeInt4(want, x, rows, cols, p)
	eg := b.QuantizeInt4(got, x, rows, cols, p)
	if err := sameErr(ew, eg); err != nil || ew != nil {
		return err
	}
	if err := diffBytes("packed", want.Packed, got.Packed); err != nil {
		return err
	}
	if err := diffBytes("scales", want.Scales, got.Scales); err != nil {
		return err
	}
	return diffBytes("group stats", StatsBytes(want.Stats), StatsBytes(got.Stats))
}

// plant puts one to four non-finite values at random places, all of them in the last tenth of
// x when late is set (past the first pipeline chunk of the big shapes).
func plant(rng *rand.Rand, x, bads []float32, late bool) {
	lo := 0
	if late {
		lo = len(x) - len(x)/10
	}
	for range 1 + rng.IntN(4) {
		x[lo+rng.IntN(len(x)-lo)] = bads[rng.IntN(len(bads))]
	}
}

// int4NonFinite puts NaN or ±Inf in a few random groups: both must name the same element.
func int4NonFinite(b Backend, rng *rand.Rand) error {
	bads := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for t, g := range []int{32, 64, 128, 32, 64, 128} {
		rows, cols := 4500, 1024 // two chunks: the report must come from the first bad one
		x := fill(rng, rows*cols, distNormal)
		plant(rng, x, bads, t >= 3)
		p, err := kernels.NewInt4Params(g, kernels.SearchMSE, false)
		if err != nil {
			return err
		}
		want, got := newInt4Out(rows, cols, g), newInt4Out(rows, cols, g)
		if err := sameErr(kernels.CPU{}.QuantizeInt4(want, x, rows, cols, &p), b.QuantizeInt4(got, x, rows, cols, &p)); err != nil {
			return fmt.Errorf("g%d: %w", g, err)
		}
	}
	return nil
}

// int4BadShape checks that wrong lengths give ErrShape, not a launch.
func int4BadShape(b Backend, _ *rand.Rand) error {
	p, err := kernels.NewInt4Params(32, kernels.SearchRTN, false)
	if err != nil {
		return err
	}
	o := newInt4Out(2, 64, 32)
	o.Stats = o.Stats[:3]
	eg := b.QuantizeInt4(o, make([]float32, 128), 2, 64, &p)
	if !errors.Is(eg, kernels.ErrShape) {
		return fmt.Errorf("cuda with 3 of 4 group stats: %v, want ErrShape", eg)
	}
	return sameErr(kernels.CPU{}.QuantizeInt4(o, make([]float32, 128), 2, 64, &p), eg)
}

// Normal returns n weights drawn from N(0, 0.02²), the bulk of a real checkpoint.
func Normal(rng *rand.Rand, n int) []float32 { return fill(rng, n, distNormal) }

// NewInt4Out returns poisoned INT4 outputs for a rows×cols slab in groups of g.
func NewInt4Out(rows, cols, g int) kernels.Int4Out { return newInt4Out(rows, cols, g) }
