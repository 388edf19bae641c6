package quantize

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"pdq/safetensors"
)

// nonFiniteBits describes how dt marks a NaN or an infinity: every element is a lane of width
// bytes in which that happens exactly when the bits of mask are all set (the exponent, or for
// FP8 e4m3fn, which has no infinities, the exponent and mantissa of its NaN code). These dtypes
// decode to float32 exactly; F64 is not among them, since a finite F64 can overflow float32.
func nonFiniteBits(dt safetensors.DType) (width int, mask uint64, ok bool) {
	switch dt {
	case safetensors.BF16:
		return 2, 0x7f80, true
	case safetensors.F16:
		return 2, 0x7c00, true
	case safetensors.F32:
		return 4, 0x7f80_0000, true
	case safetensors.F8E4M3:
		return 1, 0x7f, true
	case safetensors.F8E5M2:
		return 1, 0x7c, true
	}
	return 0, 0, false
}

// FirstNonFiniteRaw returns the index of the first element of src, encoded as dt, that is a NaN
// or an infinity, or -1 when there is none. It reads the bit patterns, eight bytes at a time,
// instead of decoding them: a tensor that is copied as it is needs this check alone. ok is false
// for a dtype it does not read that way (decode those and use CheckFinite).
func FirstNonFiniteRaw(src []byte, dt safetensors.DType) (i int, ok bool) {
	width, mask, ok := nonFiniteBits(dt)
	if !ok {
		return -1, false
	}
	// Replicate the lane's mask over a word; adding (top bit - mask) to the masked bits of a lane
	// carries into its top bit exactly when all of them are set, and never out of the lane.
	var m, add, top uint64
	for l := 0; l < 8; l += width {
		m |= mask << (8 * l)
		top |= uint64(1) << (8*(l+width) - 1)
		add |= (uint64(1)<<(8*width-1) - mask) << (8 * l)
	}
	n := len(src) / width * width
	w := 0
	for ; w+64 <= n; w += 64 { // eight words between tests
		b := (*[64]byte)(src[w:])
		x := (binary.LittleEndian.Uint64(b[0:])&m + add) | (binary.LittleEndian.Uint64(b[8:])&m + add)
		x |= (binary.LittleEndian.Uint64(b[16:])&m + add) | (binary.LittleEndian.Uint64(b[24:])&m + add)
		x |= (binary.LittleEndian.Uint64(b[32:])&m + add) | (binary.LittleEndian.Uint64(b[40:])&m + add)
		x |= (binary.LittleEndian.Uint64(b[48:])&m + add) | (binary.LittleEndian.Uint64(b[56:])&m + add)
		if x&top != 0 {
			break
		}
	}
	for ; w+8 <= n; w += 8 {
		if hit := (binary.LittleEndian.Uint64(src[w:])&m + add) & top; hit != 0 {
			return (w + bits.TrailingZeros64(hit)/8) / width, true
		}
	}
	for ; w < n; w += width { // the tail, one element at a time
		var v uint64
		for k := width - 1; k >= 0; k-- {
			v = v<<8 | uint64(src[w+k])
		}
		if v&mask == mask {
			return w / width, true
		}
	}
	return -1, true
}

// CheckFiniteRaw is CheckFinite for values still encoded as dt (one of the float dtypes
// safetensors.DType.IsFloat accepts), the first of them being element base of the tensor: the
// error names the tensor and the element's index in it. A dtype FirstNonFiniteRaw does not read
// (F64) is decoded a few values at a time, so what fails is what fails as float32.
func CheckFiniteRaw(name string, src []byte, dt safetensors.DType, base int64) error {
	width := dt.Bits() / 8
	if width == 0 {
		return fmt.Errorf("quantize: tensor %q: no finiteness check for dtype %s", name, dt)
	}
	var v [256]float32
	i, ok := FirstNonFiniteRaw(src, dt)
	for c := 0; !ok && c < len(src)/width; c += len(v) {
		n := min(len(v), len(src)/width-c)
		if err := decodeFloat32(v[:n], src[c*width:(c+n)*width], dt); err != nil {
			return fmt.Errorf("quantize: tensor %q: %w", name, err)
		}
		if j := firstNonFinite(v[:n]); j >= 0 {
			i, ok = c+j, true
		}
	}
	if i < 0 || !ok {
		return nil
	}
	if err := decodeFloat32(v[:1], src[i*width:(i+1)*width], dt); err != nil {
		return fmt.Errorf("quantize: tensor %q: %w", name, err)
	}
	return fmt.Errorf("quantize: tensor %q: element %d is %v: %w", name, base+int64(i), v[0], ErrNonFinite)
}
