//go:build cuda || cudaemu

package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"pdq/internal/floatcodec"
	"pdq/kernels"
	"pdq/kernels/cuda/parity"
)

// Fuser is a backend with the fused pass (Ops, Pool and the backends built on them).
type Fuser interface {
	Fused(out *FusedOut, s FusedSource, p *kernels.Int4Params, base int64) error
}

// fusedKind names a source form of the fused cases.
type fusedKind string

// The source forms: dense BF16 and F16, FP8 with 128×128 block, per-channel and per-tensor
// scales.
const (
	srcBF16    fusedKind = "bf16"
	srcF16     fusedKind = "f16"
	srcFP8Blk  fusedKind = "fp8-block"
	srcFP8Chan fusedKind = "fp8-channel"
	srcFP8Tens fusedKind = "fp8-tensor"
)

// FusedCases returns the parity cases of the fused pass: every source form, rtn, mse, signed
// mse and the weighted search (plain and signed), shapes with partial FP8 blocks and one spanning two pipeline chunks, and
// non-finite sources. A backend without the fused pass fails them.
func FusedCases() []parity.ParityCase {
	type shape struct{ rows, cols, g int }
	shapes := []shape{{3, 96, 32}, {130, 256, 32}, {200, 320, 64}, {129, 1024, 128}}
	methods := []struct {
		name     string
		search   kernels.Search
		signed   bool
		weighted bool
	}{{"rtn", kernels.SearchRTN, false, false}, {"mse", kernels.SearchMSE, false, false},
		{"mse-signed", kernels.SearchMSE, true, false}, {"weighted", kernels.SearchMSE, false, true},
		{"weighted-signed", kernels.SearchMSE, true, true}}
	var cs []parity.ParityCase
	add := func(name string, run func(f Fuser, rng *rand.Rand) error) {
		cs = append(cs, parity.ParityCase{Name: "fused/" + name, Run: func(b parity.Backend, rng *rand.Rand) error {
			f, ok := b.(Fuser)
			if !ok {
				return errors.New("the backend has no fused pass")
			}
			return run(f, rng)
		}})
	}
	for _, k := range []fusedKind{srcBF16, srcF16, srcFP8Blk, srcFP8Chan, srcFP8Tens} {
		for _, sh := range shapes {
			for _, m := range methods {
				add(fmt.Sprintf("%s/%s/g%d/%dx%d", k, m.name, sh.g, sh.rows, sh.cols), func(f Fuser, rng *rand.Rand) error {
					p, err := kernels.NewInt4Params(sh.g, m.search, m.signed)
					if err != nil {
						return err
					}
					src := fusedSource(rng, k, sh.rows, sh.cols)
					if m.weighted {
						src.Weights = columnWeights(rng, sh.cols, "zeros")
					}
					return fusedParity(f, src, &p, 0)
				})
			}
		}
		// Non-finite elements (NaN, ±Inf; FP8 e4m3fn has only NaN codes), early or past the
		// first pipeline chunk: both must name the same first element.
		add(fmt.Sprintf("%s/nonfinite", k), func(f Fuser, rng *rand.Rand) error {
			p, err := kernels.NewInt4Params(32, kernels.SearchMSE, false)
			if err != nil {
				return err
			}
			for _, late := range []bool{false, true} {
				rows, cols := 4200, 1024
				if !late {
					rows = 300
				}
				s := fusedSource(rng, k, rows, cols)
				for range 1 + rng.IntN(3) {
					lo := 0
					if late {
						lo = rows * cols * 9 / 10
					}
					plantRaw(rng, &s, lo+rng.IntN(rows*cols-lo))
				}
				if err := fusedParity(f, s, &p, 7); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// Two pipeline chunks (4096 rows of 1024 columns each) with the error maximum in the second.
	add("bf16/rtn/g32/4500x1024", func(f Fuser, rng *rand.Rand) error {
		p, err := kernels.NewInt4Params(32, kernels.SearchRTN, false)
		if err != nil {
			return err
		}
		s := fusedSource(rng, srcBF16, 4500, 1024)
		binary.LittleEndian.PutUint16(s.Raw[2*(4400*1024+17):], floatcodec.Float32ToBF16(3))
		return fusedParity(f, s, &p, 1<<40)
	})
	add("shape", func(f Fuser, rng *rand.Rand) error {
		p, err := kernels.NewInt4Params(32, kernels.SearchRTN, false)
		if err != nil {
			return err
		}
		s := fusedSource(rng, srcBF16, 4, 64)
		s.DType = kernels.F32
		out := newFusedOut(4, 64, 32)
		if err := f.Fused(&out, s, &p, 0); !errors.Is(err, ErrFusedSource) {
			return fmt.Errorf("an F32 source: %v, want ErrFusedSource", err)
		}
		s = fusedSource(rng, srcBF16, 4, 64)
		out.FP8Codes = out.FP8Codes[1:]
		if err := f.Fused(&out, s, &p, 0); !errors.Is(err, kernels.ErrShape) {
			return fmt.Errorf("a short output: %v, want kernels.ErrShape", err)
		}
		return nil
	})
	return cs
}

// fusedSource draws a rows×cols source of kind k: normal weights with per-row gains and a few
// outliers.
func fusedSource(rng *rand.Rand, k fusedKind, rows, cols int) FusedSource {
	x := make([]float32, rows*cols)
	for r := range rows {
		gain := 0.005 + 0.04*rng.Float64()
		for c := range cols {
			v := rng.NormFloat64() * gain
			if rng.IntN(500) == 0 {
				v *= 20
			}
			x[r*cols+c] = float32(v)
		}
	}
	s := FusedSource{DType: kernels.BF16, Rows: rows, Cols: cols}
	switch k {
	case srcBF16, srcF16:
		s.Raw = make([]byte, 2*len(x))
		for i, v := range x {
			h := floatcodec.Float32ToBF16(v)
			if k == srcF16 {
				s.DType, h = kernels.F16, floatcodec.Float32ToF16(v)
			}
			binary.LittleEndian.PutUint16(s.Raw[2*i:], h)
		}
		return s
	}
	s.DType = kernels.F8E4M3
	s.Raw = make([]byte, len(x))
	switch k {
	case srcFP8Blk:
		s.BH, s.BW = kernels.FP8Block, kernels.FP8Block
		s.Scale = make([]float32, ceilDiv(rows, fp8B)*ceilDiv(cols, fp8B))
		_ = kernels.CPU{}.QuantizeFP8Block(s.Raw, s.Scale, x, rows, cols)
		return s
	case srcFP8Chan:
		s.BH, s.BW = 1, cols
		s.Scale = make([]float32, rows)
	default:
		s.BH, s.BW = rows, cols
		s.Scale = make([]float32, 1)
	}
	for i := range s.Scale {
		s.Scale[i] = float32(0.0001 + 0.001*rng.Float64())
	}
	for i := range s.Raw {
		c := uint8(rng.IntN(256))
		if c&0x7f == 0x7f { // no NaN codes unless planted
			c--
		}
		s.Raw[i] = c
	}
	return s
}

// plantRaw makes source element i non-finite.
func plantRaw(rng *rand.Rand, s *FusedSource, i int) {
	if s.DType == kernels.F8E4M3 {
		s.Raw[i] = 0x7f | uint8(rng.IntN(2))<<7
		return
	}
	bads := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	v := bads[rng.IntN(len(bads))]
	h := floatcodec.Float32ToBF16(v)
	if s.DType == kernels.F16 {
		h = floatcodec.Float32ToF16(v)
	}
	binary.LittleEndian.PutUint16(s.Raw[2*i:], h)
}

func newFusedOut(rows, cols, g int) FusedOut {
	n := rows * cols
	o := FusedOut{
		Int4:      kernels.Int4Out{Packed: make([]byte, n/2), Scales: make([]byte, 2*(n/g)), Stats: make([]kernels.GroupStats, n/g)},
		FP8Codes:  make([]byte, n),
		FP8Scales: make([]float32, ceilDiv(rows, fp8B)*ceilDiv(cols, fp8B)),
	}
	for _, b := range [][]byte{o.Int4.Packed, o.Int4.Scales, parity.StatsBytes(o.Int4.Stats), o.FP8Codes, f32Bytes(o.FP8Scales)} {
		for i := range b {
			b[i] = 0xA5 ^ byte(i*7)
		}
	}
	return o
}

// fusedParity runs the fused pass on f and on the CPU and compares every output byte, the
// non-finite reports, and the error sums (exact N, maximum and index; the sums within
// parity.ErrSumsBound).
func fusedParity(f Fuser, s FusedSource, p *kernels.Int4Params, base int64) error {
	want, got := newFusedOut(s.Rows, s.Cols, p.GroupSize), newFusedOut(s.Rows, s.Cols, p.GroupSize)
	ew := FusedCPU(&want, s, p, base)
	eg := f.Fused(&got, s, p, base)
	var w, g *kernels.NonFiniteError
	switch {
	case ew == nil && eg == nil:
	case errors.As(ew, &w) && errors.As(eg, &g):
		if w.Index != g.Index || math.Float32bits(w.Value) != math.Float32bits(g.Value) {
			return fmt.Errorf("non-finite report: cpu %v, device %v", ew, eg)
		}
		return nil
	default:
		return fmt.Errorf("errors differ: cpu %v, device %v", ew, eg)
	}
	for _, c := range []struct {
		name      string
		want, got []byte
	}{
		{"int4 packed", want.Int4.Packed, got.Int4.Packed},
		{"int4 scales", want.Int4.Scales, got.Int4.Scales},
		{"int4 stats", parity.StatsBytes(want.Int4.Stats), parity.StatsBytes(got.Int4.Stats)},
		{"fp8 codes", want.FP8Codes, got.FP8Codes},
		{"fp8 scales", f32Bytes(want.FP8Scales), f32Bytes(got.FP8Scales)},
	} {
		if !bytes.Equal(c.want, c.got) {
			i := 0
			for i < len(c.want) && c.want[i] == c.got[i] {
				i++
			}
			return fmt.Errorf("%s differ from byte %d of %d", c.name, i, len(c.want))
		}
	}
	if err := sumsWithin("int4", want.Int4Sums, got.Int4Sums); err != nil {
		return err
	}
	return sumsWithin("fp8", want.FP8Sums, got.FP8Sums)
}

// sumsWithin compares chunked error sums with the CPU's: N, the maximum and its index exactly,
// the five sums within parity.ErrSumsBound (Σ|ref·got| bounded by Cauchy-Schwarz).
func sumsWithin(what string, want, got kernels.ErrSums) error {
	if got.N != want.N || got.MaxAbsErr != want.MaxAbsErr || got.MaxAbsIdx != want.MaxAbsIdx {
		return fmt.Errorf("%s sums: N/max/index %d %v %d, cpu %d %v %d", what, got.N, got.MaxAbsErr, got.MaxAbsIdx, want.N, want.MaxAbsErr, want.MaxAbsIdx)
	}
	n := int(want.N)
	for _, c := range []struct {
		name         string
		got, want, a float64
	}{
		{"SumSqRef", got.SumSqRef, want.SumSqRef, want.SumSqRef},
		{"SumSqErr", got.SumSqErr, want.SumSqErr, want.SumSqErr},
		{"SumAbsErr", got.SumAbsErr, want.SumAbsErr, want.SumAbsErr},
		{"Dot", got.Dot, want.Dot, math.Sqrt(want.SumSqRef * want.SumSqGot)},
		{"SumSqGot", got.SumSqGot, want.SumSqGot, want.SumSqGot},
	} {
		if d := math.Abs(c.got - c.want); d > parity.ErrSumsBound(n, c.a) {
			return fmt.Errorf("%s sums: %s %v, cpu %v: difference %g above the bound %g", what, c.name, c.got, c.want, d, parity.ErrSumsBound(n, c.a))
		}
	}
	return nil
}
