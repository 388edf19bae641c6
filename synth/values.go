package synth

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
)

// baseSigma is the standard deviation of generated Linear weights, a typical value for trained
// models of this size.
const baseSigma = 0.02

// valueGen produces the values of one tensor row by row, deterministically from (seed, name):
// the same tensor gets the same values whatever order or worker generates it.
type valueGen struct {
	t         Tensor
	rng       *rand.Rand
	heavy     bool      // Student-t with 4 degrees of freedom instead of normal
	rowGain   []float32 // per-row gain (log-normal), for 2-D weights
	outlierP  float64   // probability that an element is an outlier
	cols      int
	nextRow   int
	sigmaHere float64
}

func tensorSeed(seed uint64, name, salt string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(salt))
	return h.Sum64() ^ seed*0x9e3779b97f4a7c15
}

// newValueGen prepares the generator for tensor t.
func newValueGen(seed uint64, t Tensor) *valueGen {
	rows, cols := 1, 1
	if len(t.Shape) == 2 {
		rows, cols = int(t.Shape[0]), int(t.Shape[1])
	} else if len(t.Shape) == 1 {
		cols = int(t.Shape[0])
	}
	s := tensorSeed(seed, t.Name, "values")
	g := &valueGen{t: t, rng: rand.New(rand.NewPCG(s, s>>1|1)), cols: cols, sigmaHere: baseSigma}
	if t.Kind == KindLinear || t.Kind == KindDense {
		// Attention query/key projections are heavy-tailed in real models; so is one expert
		// tensor in four.
		g.heavy = strings.Contains(t.Name, "q_proj") || strings.Contains(t.Name, "k_proj") ||
			strings.Contains(t.Name, "q_b_proj") || strings.Contains(t.Name, "kv_a_proj") ||
			tensorSeed(seed, t.Name, "heavy")%4 == 0
		g.outlierP = 1.0 / 8192
		gr := rand.New(rand.NewPCG(tensorSeed(seed, t.Name, "gain"), 7))
		g.rowGain = make([]float32, rows)
		for i := range g.rowGain {
			g.rowGain[i] = float32(math.Exp(0.25 * gr.NormFloat64()))
		}
	}
	return g
}

// fill writes the next len(dst)/cols rows of the tensor into dst.
func (g *valueGen) fill(dst []float32) {
	for i := range dst {
		row := g.nextRow + i/g.cols
		switch g.t.Kind {
		case KindNorm:
			dst[i] = float32(1 + 0.05*g.rng.NormFloat64())
		case KindBias:
			dst[i] = float32(0.01 * g.rng.NormFloat64())
		default:
			var z float64
			if g.heavy {
				// t4 = z / sqrt(chi2_4 / 4); chi2_4 = -2 ln(u1 u2). Its variance is 2.
				u := (1 - g.rng.Float64()) * (1 - g.rng.Float64())
				z = g.rng.NormFloat64() / math.Sqrt(-2*math.Log(u)/4) / math.Sqrt2
			} else {
				z = g.rng.NormFloat64()
			}
			if g.rng.Float64() < g.outlierP {
				z *= 8 + 24*g.rng.Float64()
			}
			dst[i] = float32(z*g.sigmaHere) * g.rowGain[row]
		}
	}
	g.nextRow += len(dst) / g.cols
}
