package quantize

import (
	"errors"
	"fmt"

	"pdq/kernels"
)

// Sentinel errors; returned errors wrap them with the tensor or element concerned.
var (
	// ErrNonFinite: a tensor holds NaN or ±Inf.
	ErrNonFinite = errors.New("non-finite value")
	// ErrBadShape: slice lengths, dimensions or scale shapes do not fit together.
	ErrBadShape = errors.New("bad shape")
	// ErrInvalidOptions: quantization options that are not supported.
	ErrInvalidOptions = errors.New("invalid options")
	// ErrBadScale: a scale tensor violates its declared format (e.g. ue8m0 not a power of two).
	ErrBadScale = errors.New("bad scale")
)

// CheckFinite returns an error wrapping ErrNonFinite that names the tensor and the first NaN or
// ±Inf element, or nil when every element of w is finite. w[0] is element base of the tensor:
// the error gives the index in the tensor.
func CheckFinite(name string, w []float32, base int64) error {
	if i := firstNonFinite(w); i >= 0 {
		return fmt.Errorf("quantize: tensor %q: element %d is %v: %w", name, base+int64(i), w[i], ErrNonFinite)
	}
	return nil
}

func firstNonFinite(w []float32) int { return kernels.FirstNonFinite(w) }

func badShape(format string, args ...any) error {
	return fmt.Errorf("quantize: "+format+": %w", append(args, ErrBadShape)...)
}
