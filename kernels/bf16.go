package kernels

import (
	"encoding/binary"

	"pdq/internal/floatcodec"
)

// DecodeBF16 widens len(dst) little-endian bfloat16 values of src to float32 (exact: the bits
// move up sixteen places, NaN payloads included). It panics when src holds fewer than
// 2·len(dst) bytes. The scalar loop below is the specification; SIMD builds run vector loops
// with the same bits.
func DecodeBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	n := decodeBF16SIMD(dst, src)
	decodeBF16Scalar(dst[n:], src[2*n:])
}

// EncodeBF16 rounds len(src) float32 values to little-endian bfloat16 in dst as
// floatcodec.Float32ToBF16 does (nearest even; NaN stays NaN, quiet, sign kept). It panics when
// dst has fewer than 2·len(src) bytes.
func EncodeBF16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	n := encodeBF16SIMD(dst, src)
	encodeBF16Scalar(dst[2*n:], src[n:])
}

func decodeBF16Scalar(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = floatcodec.BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func encodeBF16Scalar(dst []byte, src []float32) {
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], floatcodec.Float32ToBF16(f))
	}
}
