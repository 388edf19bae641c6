package kernels

import (
	"math"

	"pdq/internal/floatcodec"
)

// The FP4 quantizers. SearchRTN writes the library's rule (fp4.go); SearchMSE tries, per group,
// the RTN scale code first and then the neighbouring codes of nvfp4Offsets
// (mxfp4Offsets) in order, and keeps a later code only when its group error is strictly
// smaller, so the group error never exceeds the RTN error. Codes outside the format's finite
// positive range are skipped. Groups whose absolute maximum is below TinyAbsMax keep RTN.

// nvfp4Offsets are the e4m3 code offsets from the RTN code that SearchMSE tries, in order.
// Consecutive e4m3 codes of one binade differ by 1/8 of its power of two, so the offsets span
// scales from about 0.85 to 1.75 times the RTN one: on the non-uniform E2M1 grid a group's
// error is far from monotone in its scale, and a scale that puts the extreme near 4 instead of
// 6 often wins. On QUALITY.md's data this set is within 0.001 dB of trying every code from
// -12 to +12 (docs/FP4.md).
var nvfp4Offsets = [...]int{-1, 1, -2, 3, 4, 5, 6}

// mxfp4Offsets are the E8M0 code offsets SearchMSE tries: half the RTN scale (the RTN scale
// puts the extreme in [3.5, 7); half of it clips the extreme for finer steps). Twice the RTN
// scale never won a group on QUALITY.md's data and is not tried.
var mxfp4Offsets = [...]int{-1}

// QuantizeNVFP4 quantizes a rows×cols slab (cols a multiple of 16) to NVFP4 under the global
// scale g (NVFP4GlobalScale of the tensor's, or the fused tensors', absolute maximum): packed
// E2M1 codes, one e4m3 scale code per group of 16 and the group statistics. It returns an error
// wrapping ErrShape for lengths that do not fit, ErrGlobalScale for g out of range, or a
// *NonFiniteError for NaN or ±Inf in src.
func QuantizeNVFP4(out FP4Out, src []float32, rows, cols int, g float32, search Search) error {
	ng, err := checkFP4Shapes(out, src, rows, cols, NVFP4GroupSize)
	if err != nil {
		return err
	}
	if err := checkGlobal(g); err != nil {
		return err
	}
	return quantizeFP4(out, src, ng, NVFP4GroupSize, g, search)
}

// QuantizeMXFP4 quantizes a rows×cols slab (cols a multiple of 32) to MXFP4: packed E2M1 codes,
// one E8M0 scale code per group of 32 and the group statistics. Errors are those of
// QuantizeNVFP4.
func QuantizeMXFP4(out FP4Out, src []float32, rows, cols int, search Search) error {
	ng, err := checkFP4Shapes(out, src, rows, cols, MXFP4GroupSize)
	if err != nil {
		return err
	}
	return quantizeFP4(out, src, ng, MXFP4GroupSize, 0, search)
}

// fp4MaxCand bounds the candidates of a group: the RTN scale and the offsets.
const fp4MaxCand = 1 + max(len(nvfp4Offsets), len(mxfp4Offsets))

// fp4Cand holds the candidate scales of one group, the RTN one first: their codes and effective
// float32 scales.
type fp4Cand struct {
	n     int
	codes [fp4MaxCand]uint8
	s     [fp4MaxCand]float32
}

// fp4Chunk is the number of groups whose candidates are prepared before they are quantized.
const fp4Chunk = 32

// quantizeFP4 quantizes the ng groups of gs elements of src, NVFP4 (gs 16, global scale g) or
// MXFP4 (gs 32): a chunk of groups at a time, first each group's candidates, then the groups.
func quantizeFP4(out FP4Out, src []float32, ng, gs int, g float32, search Search) error {
	var cs [fp4Chunk]fp4Cand
	// The effective scale of every finite positive e4m3 code under g, computed once (the same
	// IEEE divisions NVFP4Scale does per group).
	var tab [0x7f]float32
	if gs == NVFP4GroupSize {
		for c := 1; c < len(tab); c++ {
			tab[c] = NVFP4Scale(uint8(c), g)
		}
	}
	// Whole batches of groups in vectors where the loops have them (the same bytes), then the
	// rest a chunk at a time.
	for k0 := callFP4Batches(out, src, ng, gs, g, search); k0 < ng; k0 += fp4Chunk {
		k1 := min(ng, k0+fp4Chunk)
		for k := k0; k < k1; k++ {
			x := src[k*gs : (k+1)*gs : (k+1)*gs]
			ab := absMaxBits(x)
			if ab >= 0x7f800000 {
				bad := firstNonFinite(x)
				return &NonFiniteError{Index: int64(k*gs + bad), Value: x[bad]}
			}
			c := &cs[k-k0]
			if gs == NVFP4GroupSize {
				nvfp4Cands(c, math.Float32frombits(ab), g, &tab, search)
			} else {
				mxfp4Cands(c, ab, search)
			}
		}
		callFP4Groups(out, src, k0, k1, gs, cs[:k1-k0])
	}
	return nil
}

// nvfp4Cands sets the candidates of an NVFP4 group with absolute maximum a; tab holds the
// effective scale of each code under g.
func nvfp4Cands(c *fp4Cand, a, g float32, tab *[0x7f]float32, search Search) {
	c0 := nvfp4RTNCode(a, g)
	c.codes[0], c.s[0], c.n = c0, tab[c0&0x7f], 1
	if search != SearchMSE || a < TinyAbsMax {
		return
	}
	for _, d := range nvfp4Offsets {
		v := int(c0) + d
		if v < 1 || v > 0x7e {
			continue
		}
		c.codes[c.n], c.s[c.n] = uint8(v), tab[v]
		c.n++
	}
}

// mxfp4Cands sets the candidates of an MXFP4 group whose absolute maximum has the bits ab.
func mxfp4Cands(c *fp4Cand, ab uint32, search Search) {
	c0 := mxfp4RTNCode(ab)
	c.codes[0], c.s[0], c.n = c0, MXFP4Scale(c0), 1
	if search != SearchMSE || math.Float32frombits(ab) < TinyAbsMax {
		return
	}
	for _, d := range mxfp4Offsets {
		v := int(c0) + d
		if v < 0 || v > 254 {
			continue
		}
		c.codes[c.n], c.s[c.n] = uint8(v), MXFP4Scale(uint8(v))
		c.n++
	}
}

// fp4GroupsScalar quantizes groups k0..k1-1 (of gs elements) with their candidates cs: the
// specification of callFP4Groups.
func fp4GroupsScalar(out FP4Out, src []float32, k0, k1, gs int, cs []fp4Cand) {
	for k := k0; k < k1; k++ {
		c := &cs[k-k0]
		i, st := fp4Group(out.Packed[k*gs/2:(k+1)*gs/2], src[k*gs:(k+1)*gs:(k+1)*gs], c.s[:c.n])
		out.Scales[k] = c.codes[i]
		out.Stats[k] = st
	}
}

// fp4Group quantizes the group x (a multiple of 8 elements) with the first of the effective
// scales sc whose error is smallest (sc[0] is the RTN scale), writes its codes into dst and
// returns its index and the group statistics.
func fp4Group(dst []byte, x []float32, sc []float32) (int, GroupStats) {
	if len(sc) == 1 {
		st := fp4Pack(dst, x, sc[0])
		st.RTNErr = st.Err
		return 0, st
	}
	best, bestE := 0, fp4Err(x, sc[0])
	rtnErr := bestE
	for i := 1; i < len(sc); i++ {
		if e := fp4Err(x, sc[i]); e < bestE {
			best, bestE = i, e
		}
	}
	st := fp4Pack(dst, x, sc[best])
	st.RTNErr = rtnErr
	return best, st
}

// fp4Err returns Σ(x - f32(value·s))² over x, eight lanes.
func fp4Err(x []float32, s float32) float32 {
	var e [8]float32
	for len(x) >= 8 {
		v := x[:8:8]
		for j := range 8 {
			d := v[j] - float32(e2m1Values[fp4Encode(v[j]/s)]*s)
			e[j] += float32(d * d)
		}
		x = x[8:]
	}
	return lanes(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7])
}

// fp4Pack writes the codes of x under the effective scale s into dst (len(x)/2 bytes) and
// returns the sums of the group statistics (RTNErr left zero).
func fp4Pack(dst []byte, x []float32, s float32) GroupStats {
	var e, q [8]float32
	var clipped int32
	for len(x) >= 8 {
		v := x[:8:8]
		var c [8]uint8
		for j := range 8 {
			r := v[j] / s
			c[j] = fp4Encode(r)
			if math.Float32bits(floatcodec.RoundBF16(r))&0x7fffffff > 0x40c00000 {
				clipped++
			}
			d := v[j] - float32(e2m1Values[c[j]]*s)
			e[j] += float32(d * d)
			q[j] += float32(v[j] * v[j])
		}
		d := dst[:4:4]
		for j := range 4 {
			d[j] = c[2*j] | c[2*j+1]<<4
		}
		dst = dst[4:]
		x = x[8:]
	}
	return GroupStats{
		SumSq:   lanes(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]),
		Err:     lanes(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]),
		Clipped: clipped,
	}
}
