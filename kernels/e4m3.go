package kernels

import "math"

// e4m3 rounds v to FP8 e4m3fn, nearest even, saturating at ±448 (the e4m3fn maximum; the
// format has no infinity); NaN gives 0x7F with v's sign. It returns exactly what
// floatcodec.Float32ToF8E4M3 returns (tested over the whole float32 range) and is the
// conversion CUDA's cvt.rn.satfinite.e4m3x2.f32 performs.
func e4m3(v float32) uint8 {
	b := math.Float32bits(v)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	switch {
	case a >= 0x43e00000: // |v| ≥ 448, ±Inf, NaN
		if a > 0x7f800000 {
			return sign | 0x7f
		}
		return sign | 0x7e
	case a >= 0x3c800000: // |v| ≥ 2^-6: normal in e4m3; a carry may round up to the next binade
		r := a + 0x7ffff + (a>>20)&1
		return sign | uint8(r>>20-120<<3)
	default: // subnormal in e4m3: |v|·2^9 rounded to an integer 0..8 (8 is the smallest normal)
		f := math.Float32frombits(a)*512 + rne
		return sign | uint8(math.Float32bits(f)-0x4b400000)
	}
}
