package kernels

import (
	"encoding/binary"
	"math"
	"testing"

	"pdq/internal/floatcodec"
)

// FuzzInt4Spec feeds arbitrary finite float32 groups to QuantizeInt4 and compares every output
// with refGroup, the plain restatement of the specification, for each search and sign mode.
func FuzzInt4Spec(f *testing.F) {
	seed := make([]byte, 4*32)
	for i := range 32 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i-16)/4))
	}
	f.Add(seed, uint8(0))
	f.Add(make([]byte, 64), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		n := len(data) / 4 / 8 * 8
		if n == 0 {
			return
		}
		x := make([]float32, n)
		for i := range x {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				v = 0
			}
			x[i] = v
		}
		p := mustParams(t, n, Search(mode&1), mode&2 != 0)
		out := quant(t, x, 1, n, p)
		q, s, st := refGroup(x, p)
		if gs := floatcodec.BF16ToFloat32(binary.LittleEndian.Uint16(out.Scales)); math.Float32bits(gs) != math.Float32bits(s) && !(gs == 0 && s == 0) {
			t.Fatalf("scale %v, spec %v", gs, s)
		}
		if !sameStats(out.Stats[0], st) {
			t.Fatalf("stats %+v, spec %+v", out.Stats[0], st)
		}
		for i, l := range q {
			if nib := int(out.Packed[i/2]>>(4*(i%2))) & 15; nib-8 != l {
				t.Fatalf("element %d (%v): level %d, spec %d", i, x[i], nib-8, l)
			}
		}
	})
}

// sameStats compares stats bit for bit, treating NaN sums (overflowing inputs) as equal.
func sameStats(a, b GroupStats) bool {
	eq := func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) || x != x && y != y }
	return eq(a.SumSq, b.SumSq) && eq(a.Err, b.Err) && eq(a.RTNErr, b.RTNErr) && a.Clipped == b.Clipped
}
