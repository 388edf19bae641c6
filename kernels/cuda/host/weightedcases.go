//go:build cuda || cudaemu

package host

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"pdq/kernels"
	"pdq/kernels/cuda/parity"
)

// WeightedInt4 is a backend with the weighted INT4 search (Ops, Pool and the backends built on
// them).
type WeightedInt4 interface {
	QuantizeInt4Weighted(out kernels.Int4Out, src []float32, rows, cols int, p *kernels.Int4Params, d []float32) error
}

// WeightedCases returns the parity cases of the weighted INT4 search: rtn, mse and signed mse,
// group sizes 24 to 128, log-normal column weights, uniform ones (the plain search's path) and
// weights with zeros, a shape over two pipeline chunks, and non-finite input.
func WeightedCases() []parity.ParityCase {
	type shape struct{ rows, cols, g int }
	shapes := []shape{{3, 96, 32}, {17, 512, 32}, {5, 64, 64}, {9, 640, 128}, {3, 24, 24}, {4200, 1024, 32}}
	methods := []struct {
		name   string
		search kernels.Search
		signed bool
	}{{"rtn", kernels.SearchRTN, false}, {"mse", kernels.SearchMSE, false}, {"mse-signed", kernels.SearchMSE, true}}
	var cs []parity.ParityCase
	add := func(name string, run func(b WeightedInt4, rng *rand.Rand) error) {
		cs = append(cs, parity.ParityCase{Name: "int4-weighted/" + name, Run: func(b parity.Backend, rng *rand.Rand) error {
			w, ok := b.(WeightedInt4)
			if !ok {
				return errors.New("the backend has no weighted INT4 search")
			}
			return run(w, rng)
		}})
	}
	for _, sh := range shapes {
		for _, m := range methods {
			for _, wk := range []string{"lognormal", "uniform", "zeros"} {
				if sh.rows > 1000 && (m.name != "mse" || wk != "lognormal") {
					continue // the big shape checks the chunks; one variant is enough
				}
				add(fmt.Sprintf("%s/g%d/%dx%d/%s", m.name, sh.g, sh.rows, sh.cols, wk), func(b WeightedInt4, rng *rand.Rand) error {
					p, err := kernels.NewInt4Params(sh.g, m.search, m.signed)
					if err != nil {
						return err
					}
					x := normalRows(rng, sh.rows, sh.cols)
					return weightedParity(b, x, sh.rows, sh.cols, &p, columnWeights(rng, sh.cols, wk))
				})
			}
		}
	}
	add("nonfinite", func(b WeightedInt4, rng *rand.Rand) error {
		p, err := kernels.NewInt4Params(32, kernels.SearchMSE, false)
		if err != nil {
			return err
		}
		rows, cols := 300, 256
		x := normalRows(rng, rows, cols)
		for range 1 + rng.IntN(3) {
			x[rng.IntN(len(x))] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[rng.IntN(3)]
		}
		return weightedParity(b, x, rows, cols, &p, columnWeights(rng, cols, "lognormal"))
	})
	return cs
}

func normalRows(rng *rand.Rand, rows, cols int) []float32 {
	x := make([]float32, rows*cols)
	for r := range rows {
		gain := 0.005 + 0.04*rng.Float64()
		for c := range cols {
			v := rng.NormFloat64() * gain
			if rng.IntN(300) == 0 {
				v *= 15
			}
			x[r*cols+c] = float32(v)
		}
	}
	return x
}

// columnWeights draws E[x²]-like column weights: log-normal, all equal, or log-normal with
// every seventh zero.
func columnWeights(rng *rand.Rand, cols int, kind string) []float32 {
	d := make([]float32, cols)
	for j := range d {
		switch kind {
		case "uniform":
			d[j] = 0.75
		default:
			d[j] = float32(math.Exp(1.5 * rng.NormFloat64()))
			if kind == "zeros" && j%7 == 3 {
				d[j] = 0
			}
		}
	}
	return d
}

func weightedParity(b WeightedInt4, x []float32, rows, cols int, p *kernels.Int4Params, d []float32) error {
	want, got := newFusedOut(rows, cols, p.GroupSize).Int4, newFusedOut(rows, cols, p.GroupSize).Int4
	ew := kernels.CPU{}.QuantizeInt4Weighted(want, x, rows, cols, p, d)
	eg := b.QuantizeInt4Weighted(got, x, rows, cols, p, d)
	var we, ge *kernels.NonFiniteError
	switch {
	case ew == nil && eg == nil:
	case errors.As(ew, &we) && errors.As(eg, &ge):
		if we.Index != ge.Index || math.Float32bits(we.Value) != math.Float32bits(ge.Value) {
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
		{"packed", want.Packed, got.Packed},
		{"scales", want.Scales, got.Scales},
		{"stats", parity.StatsBytes(want.Stats), parity.StatsBytes(got.Stats)},
	} {
		if !bytes.Equal(c.want, c.got) {
			i := 0
			for c.want[i] == c.got[i] {
				i++
			}
			return fmt.Errorf("%s differ from byte %d of %d", c.name, i, len(c.want))
		}
	}
	return nil
}
