package quantize

import (
	"math"
	"testing"

	"pdq/internal/floatcodec"
	"pdq/kernels"
	"pdq/quantize/qref"
)

// fp4Grid is the E2M1 magnitude grid, by index.
var fp4Grid = [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// refE2M1 is the library's cast of a ratio written plainly: r rounded to BF16, then the nearest
// grid value, ties to the even index, saturating at 6; the sign bit is r's.
func refE2M1(r float32) uint8 {
	b := math.Abs(float64(floatcodec.RoundBF16(r)))
	best := 0
	for i, g := range fp4Grid {
		d, bd := math.Abs(b-g), math.Abs(b-fp4Grid[best])
		if d < bd || d == bd && i%2 == 0 {
			best = i
		}
	}
	c := uint8(best)
	if math.Signbit(float64(r)) {
		c |= 8
	}
	return c
}

// refNVFP4Scale is compressed-tensors' NVFP4 group scale in float64 steps (each exact or
// correctly rounded to float32 as the library's float32 and BF16 arithmetic is): the e4m3 code
// of G·bf16(amax/6), 0.125's code when that is zero.
func refNVFP4Scale(amax, g float32) uint8 {
	s6 := floatcodec.RoundBF16(float32(float64(amax) / 6))
	c := floatcodec.Float32ToF8E4M3(float32(float64(g) * float64(s6)))
	if c == 0 {
		c = floatcodec.Float32ToF8E4M3(0.125)
	}
	return c
}

// refMXFP4Scale is compressed-tensors' E8M0 group scale from math.Frexp: the exponent of amax,
// one more when its significand in [1, 2) is at least 1.75, minus 2, biased by 127, at least 0.
func refMXFP4Scale(amax float32) uint8 {
	if amax == 0 {
		return 0
	}
	f, e := math.Frexp(float64(amax)) // amax = f·2^e, f in [0.5, 1)
	e--                               // amax = 2f·2^e, 2f in [1, 2)
	if 2*f >= 1.75 {
		e++
	}
	return uint8(max(127+e-2, 0))
}

// fp4Reference quantizes w with the reference rules above and returns its packed codes and
// scale codes.
func fp4Reference(w []float32, gs int, g float32) (packed, scales []byte) {
	packed, scales = make([]byte, len(w)/2), make([]byte, len(w)/gs)
	for k := range scales {
		x := w[k*gs : (k+1)*gs]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		var s float32
		if gs == kernels.NVFP4GroupSize {
			scales[k] = refNVFP4Scale(amax, g)
			s = float32(float64(floatcodec.F8E4M3ToFloat32(scales[k])) / float64(g))
		} else {
			scales[k] = refMXFP4Scale(amax)
			s = float32(math.Ldexp(1, int(scales[k])-127))
		}
		for i, v := range x {
			packed[(k*gs+i)/2] |= refE2M1(float32(float64(v)/float64(s))) << (4 * (i % 2))
		}
	}
	return packed, scales
}

// fp4Exhaustive returns Σ(x - x̂)² when every group takes the best scale code among all codes
// within span of its RTN code (float64 sums), the ceiling of any search around RTN.
func fp4Exhaustive(w []float32, gs int, g float32, rtnScales []byte, span int) float64 {
	var total float64
	for k, c0 := range rtnScales {
		x := w[k*gs : (k+1)*gs]
		best := math.Inf(1)
		for c := int(c0) - span; c <= int(c0)+span; c++ {
			var s float32
			if gs == kernels.NVFP4GroupSize {
				if c < 1 || c > 0x7e {
					continue
				}
				s = kernels.NVFP4Scale(uint8(c), g)
			} else {
				if c < 0 || c > 254 {
					continue
				}
				s = kernels.MXFP4Scale(uint8(c))
			}
			var e float64
			for _, v := range x {
				d := float64(v) - float64(kernels.E2M1Value(refE2M1(v/s))*s)
				e += d * d
			}
			best = min(best, e)
		}
		total += best
	}
	return total
}

// TestQualityFP4 measures NVFP4 and MXFP4 on QUALITY.md's synthetic data (the slice TestQuality
// uses): rtn writes exactly the bytes of the reference rule, the default search is never worse
// than rtn, gains at least 0.8 dB (NVFP4) and 0.03 dB (MXFP4), and is within 0.01 dB of trying
// every scale code near the RTN one (±12 e4m3 codes, ±3 E8M0 exponents).
func TestQualityFP4(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 4M-weight tensors")
	}
	const rows, cols = 1024, 4096
	for _, d := range []qref.Dist{qref.Gauss, qref.T4} {
		w := qref.Synthetic(d, rows, cols, qref.Sigma, qref.Seed)
		var amax float32
		for _, v := range w {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		g := kernels.NVFP4GlobalScale(amax)
		for _, f := range []struct {
			name    string
			gs      int
			span    int
			minGain float64
		}{{"nvfp4", kernels.NVFP4GroupSize, 12, 0.8}, {"mxfp4", kernels.MXFP4GroupSize, 3, 0.03}} {
			measure := func(s kernels.Search) (float64, kernels.FP4Out) {
				ng := len(w) / f.gs
				out := kernels.FP4Out{Packed: make([]byte, len(w)/2), Scales: make([]byte, ng), Stats: make([]kernels.GroupStats, ng)}
				sc := make([]float32, ng)
				var err error
				if f.gs == kernels.NVFP4GroupSize {
					err = kernels.QuantizeNVFP4(out, w, rows, cols, g, s)
					kernels.NVFP4Scales(sc, out.Scales, g)
				} else {
					err = kernels.QuantizeMXFP4(out, w, rows, cols, s)
					kernels.MXFP4Scales(sc, out.Scales)
				}
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, len(w))
				if err := kernels.DequantizeFP4(got, out.Packed, sc, rows, cols, f.gs); err != nil {
					t.Fatal(err)
				}
				var m Metrics
				m.Add(w, got, 0)
				return m.SQNR(), out
			}
			rtn, rout := measure(kernels.SearchRTN)
			mse, _ := measure(kernels.SearchMSE)
			rp, rs := fp4Reference(w, f.gs, g)
			if string(rp) != string(rout.Packed) || string(rs) != string(rout.Scales) {
				t.Errorf("%s %s: rtn bytes differ from the reference rule", f.name, d)
			}
			var ss float64
			for _, v := range w {
				ss += float64(v) * float64(v)
			}
			ex := 10 * math.Log10(ss/fp4Exhaustive(w, f.gs, g, rout.Scales, f.span))
			t.Logf("%s %s: rtn %.3f dB, mse %.3f dB (+%.3f), codes within ±%d of rtn %.3f dB", f.name, d, rtn, mse, mse-rtn, f.span, ex)
			if mse < rtn+f.minGain || mse < ex-0.01 {
				t.Errorf("%s %s: mse %.3f dB, rtn %.3f, exhaustive %.3f", f.name, d, mse, rtn, ex)
			}
		}
	}
}
