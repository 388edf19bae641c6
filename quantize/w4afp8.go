package quantize

import (
	"encoding/binary"
	"fmt"
	"math"

	"pdq/internal/floatcodec"
)

// W4AFP8 is INT4 g128 symmetric weights in the pack-quantized layout with dynamic per-token FP8
// input activations declared in the config: vLLM's W4A8 path, on SM90 GPUs only
// (docs/FP4.md). The weights are ordinary INT4 output (QuantizeInt4, GroupSize
// W4AFP8GroupSize); the engine converts their BF16 group scales to e4m3 with a per-channel
// float32 scale when it loads them, and its kernel multiplies the levels by those e4m3 scales
// in e4m3: W4AFP8Dequantize gives the weights it computes with, which the report measures
// (Int4Options.Weights = W4AFP8Weights).

// W4AFP8GroupSize is the only group size vLLM's W4A8 FP8 kernels accept.
const W4AFP8GroupSize = 128

// W4AFP8Weights is how vLLM's W4A8 FP8 kernels read INT4 g128 bytes (Int4Options.Weights).
var W4AFP8Weights = &EngineWeights{Group: W4AFP8GroupSize, Dequantize: W4AFP8Dequantize}

// CheckW4AFP8Experts reports whether routed experts of hidden size hidden and intermediate size
// interPerRank per tensor-parallel rank fit vLLM's W4A8 FP8 MoE kernels: both must be
// multiples of 256 (the CUTLASS weight reorder). The error wraps ErrBadShape and names the rule.
func CheckW4AFP8Experts(hidden, interPerRank int) error {
	for _, d := range []struct {
		name string
		n    int
	}{{"hidden size", hidden}, {"expert intermediate size per tensor-parallel rank", interPerRank}} {
		if d.n <= 0 || d.n%256 != 0 {
			return badShape("W4AFP8 experts need the %s divisible by 256 (vLLM's W4A8 MoE kernels), have %d", d.name, d.n)
		}
	}
	return nil
}

// CheckW4AFP8Linear reports whether a dense Linear of in×out features per tensor-parallel rank
// fits vLLM's CUTLASS W4A8 linear kernel: both multiples of 128. The error wraps ErrBadShape.
func CheckW4AFP8Linear(in, out int) error {
	if in <= 0 || out <= 0 || in%128 != 0 || out%128 != 0 {
		return badShape("W4AFP8 Linear layers need input and output features per rank divisible by 128 (vLLM's CUTLASS W4A8 kernel), have %d×%d", in, out)
	}
	return nil
}

// fp8Max and fp8MinScale are vLLM's per-token FP8 bounds: the largest e4m3 value and the
// smallest per-token scale, 1/(448·512) rounded to float32.
const (
	fp8Max      = 448
	fp8MinScale = float32(1.0 / (fp8Max * 512.0))
)

// W4AFP8Dequantize writes into dst (rows×cols) the weights vLLM's W4A8 FP8 kernels compute
// with for INT4 levels packed as pdq writes them (two per byte, element 2i in the low nibble,
// stored as level+8) and BF16 group scales of W4AFP8GroupSize columns, each row of the
// checkpoint a whole row of the engine's (no tensor-parallel split of the in features). At load
// the engine (convert_bf16_scales_to_fp8 with a dynamic per-token QuantFP8, in float32)
// turns row r's scales s into
//
//	c = max(max|s|/448, 1/(448·512))      the row's scale
//	e = e4m3(clamp(s·(1/c), ±448))        round to nearest even
//	s8 = e4m3(e/8), chan = 8c
//
// and its kernel's lookup table (CUTLASS's packed e4m3 scales) holds e4m3(q·s8) for the levels
// q in -8..7, so a weight is e4m3(q·s8)·chan, rounded here to float32. It refuses the shapes
// and lengths DequantizeInt4 refuses, and a scale that is not finite (ErrNonFinite).
func W4AFP8Dequantize(dst []float32, packed, scales []byte, rows, cols int) error {
	const g = W4AFP8GroupSize
	if rows < 0 || cols <= 0 || cols%g != 0 {
		return badShape("W4AFP8 dequantize: %d columns are not whole groups of %d", cols, g)
	}
	ng := cols / g
	if len(dst) != rows*cols || len(packed) != rows*cols/2 || len(scales) != rows*ng*2 {
		return badShape("W4AFP8 dequantize %d×%d: dst has %d elements, packed %d bytes, scales %d bytes",
			rows, cols, len(dst), len(packed), len(scales))
	}
	s := make([]float32, ng)
	for r := range rows {
		amax := float32(0)
		for k := range s {
			s[k] = floatcodec.BF16ToFloat32(binary.LittleEndian.Uint16(scales[2*(r*ng+k):]))
			if math.IsNaN(float64(s[k])) || math.IsInf(float64(s[k]), 0) {
				return fmt.Errorf("quantize: W4AFP8 scale %d is %v: %w", r*ng+k, s[k], ErrNonFinite)
			}
			amax = max(amax, float32(math.Abs(float64(s[k]))))
		}
		c := max(amax/fp8Max, fp8MinScale)
		inv, chan8 := 1/c, c*8
		for k, sk := range s {
			e := floatcodec.F8E4M3ToFloat32(floatcodec.Float32ToF8E4M3(min(max(sk*inv, -fp8Max), fp8Max)))
			s8 := floatcodec.F8E4M3ToFloat32(floatcodec.Float32ToF8E4M3(e / 8))
			var lut [16]float32
			for i := range lut {
				lut[i] = floatcodec.F8E4M3ToFloat32(floatcodec.Float32ToF8E4M3(float32(i-8)*s8)) * chan8
			}
			o := r*cols + k*g
			d, p := dst[o:o+g], packed[o/2:(o+g)/2]
			for j, b := range p {
				d[2*j], d[2*j+1] = lut[b&15], lut[b>>4]
			}
		}
	}
	return nil
}
