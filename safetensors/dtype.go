package safetensors

import "fmt"

// DType is a safetensors element type, spelled exactly as in the header JSON ("BF16", "F8_E4M3", ...).
type DType string

// The dtypes the safetensors format defines.
const (
	BOOL       DType = "BOOL"
	F4         DType = "F4"
	F6E2M3     DType = "F6_E2M3"
	F6E3M2     DType = "F6_E3M2"
	U8         DType = "U8"
	I8         DType = "I8"
	F8E5M2     DType = "F8_E5M2"
	F8E4M3     DType = "F8_E4M3"
	F8E8M0     DType = "F8_E8M0"
	F8E4M3FNUZ DType = "F8_E4M3FNUZ"
	F8E5M2FNUZ DType = "F8_E5M2FNUZ"
	I16        DType = "I16"
	U16        DType = "U16"
	F16        DType = "F16"
	BF16       DType = "BF16"
	I32        DType = "I32"
	U32        DType = "U32"
	F32        DType = "F32"
	C64        DType = "C64"
	F64        DType = "F64"
	I64        DType = "I64"
	U64        DType = "U64"
)

// dtypeBits maps every known dtype to its width in bits.
var dtypeBits = map[DType]int{
	BOOL: 8, F4: 4, F6E2M3: 6, F6E3M2: 6, U8: 8, I8: 8,
	F8E5M2: 8, F8E4M3: 8, F8E8M0: 8, F8E4M3FNUZ: 8, F8E5M2FNUZ: 8,
	I16: 16, U16: 16, F16: 16, BF16: 16,
	I32: 32, U32: 32, F32: 32,
	C64: 64, F64: 64, I64: 64, U64: 64,
}

// Valid reports whether d is one of the dtypes the format defines.
func (d DType) Valid() bool { _, ok := dtypeBits[d]; return ok }

// Bits returns the width of one element in bits, or 0 for an unknown dtype.
func (d DType) Bits() int { return dtypeBits[d] }

// IsFloat reports whether d holds floating-point values that this package can decode to float32.
func (d DType) IsFloat() bool {
	switch d {
	case F32, F16, BF16, F8E4M3, F8E5M2, F64:
		return true
	}
	return false
}

// ByteSize returns the number of bytes n elements of d occupy. ok is false when the size is not a
// whole number of bytes (a sub-byte dtype with an odd element count) or when d is unknown.
func (d DType) ByteSize(n uint64) (size uint64, ok bool) {
	bits := uint64(d.Bits())
	if bits == 0 {
		return 0, false
	}
	if n != 0 && bits > ^uint64(0)/n {
		return 0, false
	}
	total := bits * n
	if total%8 != 0 {
		return 0, false
	}
	return total / 8, true
}

// ParseDType returns the DType spelled s, or an error wrapping ErrUnknownDType.
func ParseDType(s string) (DType, error) {
	d := DType(s)
	if !d.Valid() {
		return "", fmt.Errorf("%w: %q", ErrUnknownDType, s)
	}
	return d, nil
}
