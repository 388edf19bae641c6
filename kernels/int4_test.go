package kernels

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"pdq/internal/floatcodec"
)

func mustParams(t testing.TB, g int, s Search, signed bool) *Int4Params {
	t.Helper()
	p, err := NewInt4Params(g, s, signed)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func quant(t testing.TB, x []float32, rows, cols int, p *Int4Params) Int4Out {
	t.Helper()
	ng := rows * cols / p.GroupSize
	out := Int4Out{Packed: make([]byte, rows*cols/2), Scales: make([]byte, 2*ng), Stats: make([]GroupStats, ng)}
	if err := (CPU{}).QuantizeInt4(out, x, rows, cols, p); err != nil {
		t.Fatal(err)
	}
	return out
}

func words(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// TestInt4GoldenPacking: FORMATS.md §4 vectors. x = -7.5, -7, ..., 7 has absmax 7.5, so the RTN
// scale is exactly 1 and the levels are -8 (the tie -7.5 rounds to even), -7, ..., 7.
func TestInt4GoldenPacking(t *testing.T) {
	x := make([]float32, 32)
	x[0] = -7.5
	for i := 1; i < 16; i++ {
		x[i] = float32(i - 8)
	}
	// second half: a zero row segment
	for _, s := range []Search{SearchRTN, SearchMSE} {
		out := quant(t, x, 2, 16, mustParams(t, 16, s, false))
		got := words(out.Packed)
		want := []uint32{0x76543210, 0xFEDCBA98, 0x88888888, 0x88888888}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("search %d word %d = %#08x, want %#08x", s, i, got[i], want[i])
			}
		}
		if s == SearchRTN {
			if sc := binary.LittleEndian.Uint16(out.Scales); sc != 0x3f80 {
				t.Errorf("scale code %#04x, want 0x3f80 (1.0)", sc)
			}
		}
		if sc := binary.LittleEndian.Uint16(out.Scales[2:]); sc != 0 {
			t.Errorf("zero group scale code %#04x, want 0", sc)
		}
		if st := out.Stats[1]; st != (GroupStats{}) {
			t.Errorf("zero group stats %+v", st)
		}
	}
	// byte order: element 2j in the low nibble of byte j
	out := quant(t, x[:16], 1, 16, mustParams(t, 16, SearchRTN, false))
	if out.Packed[0] != 0x10 || out.Packed[7] != 0xFE {
		t.Errorf("bytes %x", out.Packed)
	}
}

// TestLevelMatchesRoundToEven checks the rounding trick against math.RoundToEven, ties included.
func TestLevelMatchesRoundToEven(t *testing.T) {
	check := func(v float32) {
		want := math.RoundToEven(float64(min(max(v, -8), 7)))
		if got := level(v); float64(got) != want {
			t.Fatalf("level(%v) = %v, want %v", v, got, want)
		}
	}
	for i := -40; i <= 40; i++ { // every half step, ties included
		check(float32(i) / 4)
		check(math.Nextafter32(float32(i)/4, 100))
		check(math.Nextafter32(float32(i)/4, -100))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(float32(rng.NormFloat64() * 5))
	}
	for _, v := range []float32{1e30, -1e30, 0x1p22, -0x1p22, float32(math.Inf(1)), float32(math.Inf(-1))} {
		check(v)
	}
}

// refLanes sums f(i) over i in the spec's eight-lane order, written plainly.
func refLanes(n int, f func(i int) float32) float32 {
	var l [8]float32
	for i := range n {
		l[i%8] = l[i%8] + f(i)
	}
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

// refGroup restates the specification of one group without the optimisations, for the bit-exact
// comparison with the kernel: levels, scale and stats.
func refGroup(x []float32, p *Int4Params) (q []int, s float32, st GroupStats) {
	n := len(x)
	a := float32(0)
	for _, v := range x {
		a = max(a, float32(math.Abs(float64(v))))
	}
	lv := func(v float32) int {
		return int(math.RoundToEven(float64(min(max(v, -8), 7))))
	}
	levels := func(s float32, div bool) []int {
		q := make([]int, n)
		for i, v := range x {
			if div {
				q[i] = lv(v / s)
			} else {
				q[i] = lv(v * (1 / s))
			}
		}
		return q
	}
	sse := func(q []int, s float32) float32 {
		return refLanes(n, func(i int) float32 { d := x[i] - float32(q[i])*s; return d * d })
	}
	sR := floatcodec.RoundBF16(a / 7.5)
	if sR == 0 {
		ss := refLanes(n, func(i int) float32 { return x[i] * x[i] })
		return make([]int, n), 0, GroupStats{SumSq: ss, Err: ss, RTNErr: ss}
	}
	bestQ, best, div := levels(sR, true), sR, true
	bestE := sse(bestQ, sR)
	rtnE := bestE
	if p.Search == SearchMSE && a >= TinyAbsMax {
		try := func(s float32) {
			qq := levels(s, false)
			if e := sse(qq, s); e < bestE {
				bestQ, best, bestE, div = qq, s, e, false
			}
		}
		var cands []float32
		for _, k := range p.Pos {
			s := floatcodec.RoundBF16(a * k)
			if s != sR && (len(cands) == 0 || s != cands[len(cands)-1]) {
				cands = append(cands, s)
			}
		}
		for _, s := range cands {
			try(s)
		}
		if p.Signed {
			var m float32
			for _, v := range x {
				if v == a || v == -a {
					m = v
					break
				}
			}
			var prev float32
			for _, k := range p.Neg {
				s := floatcodec.RoundBF16(a * k)
				if s == prev {
					continue
				}
				prev = s
				if m > 0 {
					s = -s
				}
				try(s)
			}
		}
		for range p.Refine {
			xq := refLanes(n, func(i int) float32 { return x[i] * float32(bestQ[i]) })
			qq := refLanes(n, func(i int) float32 { return float32(bestQ[i] * bestQ[i]) })
			if qq == 0 {
				break
			}
			s := floatcodec.RoundBF16(xq / qq)
			if s == best || s == 0 || (!p.Signed && s < 0) {
				break
			}
			prevE := bestE
			try(s)
			if bestE == prevE {
				break
			}
		}
	}
	st.RTNErr = rtnE
	st.Err = bestE
	st.SumSq = refLanes(n, func(i int) float32 { return x[i] * x[i] })
	// clipped: the nearest level of x/s (division for the RTN scale, reciprocal otherwise)
	for _, v := range x {
		var f float32
		if div {
			f = v / best
		} else {
			f = v * (1 / best)
		}
		if f >= 7.5 || f < -8.5 {
			st.Clipped++
		}
	}
	return bestQ, best, st
}

func genGroups(rng *rand.Rand, rows, cols int, heavy bool) []float32 {
	x := make([]float32, rows*cols)
	for i := range x {
		v := rng.NormFloat64() * 0.02
		if heavy {
			c := 0.0
			for range 4 {
				z := rng.NormFloat64()
				c += z * z
			}
			v /= math.Sqrt(c / 4)
		}
		x[i] = float32(v)
	}
	// a few special groups: zeros, one spike, a tiny group, ties
	if len(x) >= 4*32 {
		clear(x[:32])
		x[40] = 3
		for i := 64; i < 96; i++ {
			x[i] = float32(i-80) * 0x1p-70
		}
		for i := 96; i < 128; i++ {
			x[i] = float32(i-112) / 2
		}
	}
	return x
}

// TestInt4MatchesSpec compares the kernel with refGroup bit for bit on random and heavy-tailed
// data, for every method, group size and sign mode.
func TestInt4MatchesSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, g := range []int{8, 32, 64, 128, 256} {
		for _, search := range []Search{SearchRTN, SearchMSE} {
			for _, signed := range []bool{false, true} {
				for _, heavy := range []bool{false, true} {
					rows, cols := 24, 512
					x := genGroups(rng, rows, cols, heavy)
					p := mustParams(t, g, search, signed)
					out := quant(t, x, rows, cols, p)
					for k := range rows * cols / g {
						q, s, st := refGroup(x[k*g:(k+1)*g], p)
						if gs := floatcodec.BF16ToFloat32(binary.LittleEndian.Uint16(out.Scales[2*k:])); gs != s {
							t.Fatalf("g%d search %d signed %v group %d: scale %v, spec %v", g, search, signed, k, gs, s)
						}
						if out.Stats[k] != st {
							t.Fatalf("g%d search %d signed %v group %d: stats %+v, spec %+v", g, search, signed, k, out.Stats[k], st)
						}
						for i, l := range q {
							e := k*g + i
							nib := int(out.Packed[e/2]>>(4*(e%2))) & 15
							if nib-8 != l {
								t.Fatalf("g%d group %d element %d: level %d, spec %d", g, k, i, nib-8, l)
							}
						}
					}
				}
			}
		}
	}
}

func TestInt4NonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		x := make([]float32, 4*64)
		x[100] = 1
		x[130] = bad
		x[200] = bad
		p := mustParams(t, 32, SearchMSE, false)
		ng := len(x) / 32
		err := (CPU{}).QuantizeInt4(Int4Out{make([]byte, len(x)/2), make([]byte, 2*ng), make([]GroupStats, ng)}, x, 4, 64, p)
		var nf *NonFiniteError
		if !errors.As(err, &nf) || nf.Index != 130 {
			t.Fatalf("%v: got %v, want element 130", bad, err)
		}
	}
}

func TestInt4ShapeErrors(t *testing.T) {
	p := mustParams(t, 32, SearchRTN, false)
	x := make([]float32, 64)
	cases := []Int4Out{
		{make([]byte, 31), make([]byte, 4), make([]GroupStats, 2)},
		{make([]byte, 32), make([]byte, 2), make([]GroupStats, 2)},
		{make([]byte, 32), make([]byte, 4), make([]GroupStats, 1)},
	}
	for i, out := range cases {
		if err := (CPU{}).QuantizeInt4(out, x, 1, 64, p); !errors.Is(err, ErrShape) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	if err := (CPU{}).QuantizeInt4(cases[0], x, 1, 60, p); !errors.Is(err, ErrShape) {
		t.Errorf("cols not a multiple of the group: %v", err)
	}
	if _, err := NewInt4Params(12, SearchMSE, false); err == nil {
		t.Error("group 12 accepted")
	}
}

// TestDequantizeInt4 checks dst = (nibble-8)·scale for every nibble.
func TestDequantizeInt4(t *testing.T) {
	packed := []byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE}
	scales := []float32{0.5, -2}
	dst := make([]float32, 16)
	if err := (CPU{}).DequantizeInt4(dst, packed, scales, 2, 8, 8); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		want := float32(i-8) * scales[i/8]
		if v != want {
			t.Errorf("element %d = %v, want %v", i, v, want)
		}
	}
}

// TestNoAllocations: the CPU loops allocate nothing (FP8: up to 64 block columns).
func TestNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := genGroups(rng, 16, 1024, true)
	for _, p := range []*Int4Params{mustParams(t, 32, SearchMSE, true), mustParams(t, 128, SearchRTN, false)} {
		ng := len(x) / p.GroupSize
		out := Int4Out{make([]byte, len(x)/2), make([]byte, 2*ng), make([]GroupStats, ng)}
		if n := testing.AllocsPerRun(5, func() { (CPU{}).QuantizeInt4(out, x, 16, 1024, p) }); n != 0 {
			t.Errorf("QuantizeInt4 g%d: %v allocations", p.GroupSize, n)
		}
	}
	codes, scales := make([]byte, len(x)), make([]float32, 8)
	if n := testing.AllocsPerRun(5, func() { (CPU{}).QuantizeFP8Block(codes, scales, x, 16, 1024) }); n != 0 {
		t.Errorf("QuantizeFP8Block: %v allocations", n)
	}
}
