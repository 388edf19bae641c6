package kernels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// DType is the element type of weight bytes as a checkpoint stores them, as far as the kernels
// decode them: the kernels' own names, so that no kernel depends on a file format's package
// (the pipeline maps a format's types to these).
type DType uint8

// The element types the kernels decode. The zero DType is none of them.
const (
	BF16   DType = iota + 1 // bfloat16, little-endian
	F16                     // IEEE binary16, little-endian
	F32                     // IEEE binary32, little-endian
	F8E4M3                  // FP8 e4m3fn codes (no infinities, max 448), one byte each
)

// ErrDType reports an element type a kernel does not decode.
var ErrDType = errors.New("kernels: element type not decoded here")

// String returns the type's name as checkpoints write it ("BF16", "F16", "F32", "F8_E4M3").
func (d DType) String() string {
	switch d {
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case F32:
		return "F32"
	case F8E4M3:
		return "F8_E4M3"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the number of bytes of one element (0 for an unknown type).
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	case F8E4M3:
		return 1
	}
	return 0
}

// DecodeDense widens the little-endian elements of src, of a dense type (BF16, F16 or F32), into
// dst, exactly: DecodeBF16, DecodeF16, or the float32 bits as stored. It is the CPU
// specification of the GPU's dense decoders. src must hold len(dst)·dt.Size() bytes; other
// lengths wrap ErrShape, other types ErrDType.
func DecodeDense(dst []float32, src []byte, dt DType) error {
	switch dt {
	case BF16, F16, F32:
	default:
		return fmt.Errorf("kernels: decode %s: %w", dt, ErrDType)
	}
	if len(src) != len(dst)*dt.Size() {
		return fmt.Errorf("kernels: decode %s: %d bytes for %d elements: %w", dt, len(src), len(dst), ErrShape)
	}
	switch dt {
	case BF16:
		DecodeBF16(dst, src)
	case F16:
		DecodeF16(dst, src)
	default:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
	return nil
}
