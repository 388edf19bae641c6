package kernels

import (
	"encoding/binary"

	"pdq/internal/floatcodec"
)

// DecodeF16 widens len(dst) little-endian IEEE binary16 values of src to float32 (exact, as
// floatcodec.F16ToFloat32: subnormals become normal float32 values, infinities stay infinite,
// NaN payloads move up thirteen places unquieted). It panics when src holds fewer than
// 2·len(dst) bytes. The scalar loop below is the specification; SIMD builds run vector loops
// with the same bits.
func DecodeF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	n := decodeF16SIMD(dst, src)
	decodeF16Scalar(dst[n:], src[2*n:])
}

func decodeF16Scalar(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = floatcodec.F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}
