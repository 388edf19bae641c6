package qref

import (
	"math"
	"slices"
	"testing"

	"pdq/safetensors"
)

func TestSynthetic(t *testing.T) {
	for _, d := range []Dist{Gauss, T4} {
		w := Synthetic(d, 256, 256, 0.02, 1)
		if !slices.Equal(w, Synthetic(d, 256, 256, 0.02, 1)) {
			t.Fatalf("%s: not deterministic", d)
		}
		var ss, kurt float64
		for _, v := range w {
			if safetensors.F16ToFloat32(safetensors.Float32ToF16(v)) != v {
				t.Fatalf("%s: %v is not an F16 value", d, v)
			}
			ss += float64(v) * float64(v)
		}
		sd := math.Sqrt(ss / float64(len(w)))
		for _, v := range w {
			z := float64(v) / sd
			kurt += z * z * z * z
		}
		kurt /= float64(len(w))
		if math.Abs(sd-0.02) > 0.001 {
			t.Errorf("%s: standard deviation %v", d, sd)
		}
		// normal kurtosis 3; t4's is infinite in theory, large in samples
		if (d == Gauss) != (kurt < 3.5) {
			t.Errorf("%s: kurtosis %v", d, kurt)
		}
	}
}

// TestExhaustiveSearch: the search never loses to the RTN rule, and Err is the squared error.
func TestExhaustiveSearch(t *testing.T) {
	w := Synthetic(T4, 64, 256, 0.02, 2)
	rtn := func(x []float32) float64 {
		var a float32
		for _, v := range x {
			a = max(a, float32(math.Abs(float64(v))))
		}
		return Err(x, safetensors.RoundBF16(a/7.5))
	}
	s := Exhaustive(0.8, false)
	var buf []float32
	for k := 0; k < len(w); k += 32 {
		x := w[k : k+32]
		var e float64
		e, buf = s.group(x, nil, buf)
		if r := rtn(x); e > r {
			t.Fatalf("group %d: search %g > rtn %g", k/32, e, r)
		}
	}
	if e := Err([]float32{1, -2, 3.25, 9}, 1); e != 0.0625+4 { // 9 clips to 7
		t.Errorf("Err = %v, want 4.0625", e)
	}
	if Err([]float32{1, 2}, 0) != 5 {
		t.Error("Err with scale 0 is not Σx²")
	}
	pos, sig := Exhaustive(0.8, false).SQNR(w, 32), Exhaustive(0.8, true).SQNR(w, 32)
	if !(sig >= pos) || pos < 17 {
		t.Errorf("SQNR positive %v, signed %v", pos, sig)
	}
}
