package quantize

import (
	"fmt"

	"pdq/kernels"
)

// Method selects how INT4 group scales are chosen.
type Method string

const (
	// MethodRTN is the compressed-tensors reference rule: s = bf16(absmax/7.5) computed in
	// float32, q = round-half-even(clamp(x/s, -8, 7)) with an IEEE float32 division.
	MethodRTN Method = "rtn"
	// MethodMSE (the default) searches, per group, the scale with the smallest squared error,
	// BF16 rounding of the scale included, then refines it by least squares. The RTN scale is
	// among the candidates, so no group ends worse than with MethodRTN.
	MethodMSE Method = "mse"
)

// Int4Options configures QuantizeInt4. The zero value means MSE search with one group per row;
// the project's default scheme is GroupSize 32.
type Int4Options struct {
	// GroupSize is the number of consecutive elements of a row sharing one scale: 32, 64, 128,
	// or 0 for one group per row (per output channel, group = cols).
	GroupSize int
	// Method is MethodMSE (also when empty) or MethodRTN.
	Method Method
	// SignedScales (experimental, Q4_0 style) lets the MSE search pick negative scales so that a
	// group's extreme lands on -8. The engines' kernels have not been tested with negative
	// scales. Not valid with MethodRTN.
	SignedScales bool
	// Workers bounds the goroutines used; <= 0 means GOMAXPROCS. Results do not depend on it.
	Workers int
	// Backend runs the loops; nil means kernels.CPU.
	Backend kernels.Backend
	// FirstRow is the row of its tensor that the first row given is: errors count rows and
	// elements from the tensor's start. 0 when the whole tensor is given. The output does not
	// depend on it.
	FirstRow int
}

// Validate reports whether the options can quantize rows of cols elements: cols must be a
// positive multiple of 8 and of the group size.
func (o Int4Options) Validate(cols int) error {
	switch o.GroupSize {
	case 0, 32, 64, 128:
	default:
		return fmt.Errorf("quantize: INT4 group size %d (want 32, 64, 128 or 0 for per channel): %w", o.GroupSize, ErrInvalidOptions)
	}
	if o.Method != "" {
		if err := o.Method.Check(); err != nil {
			return err
		}
	}
	if o.SignedScales && o.Method == MethodRTN {
		return fmt.Errorf("quantize: signed scales need the %q search: %w", MethodMSE, ErrInvalidOptions)
	}
	g := o.group(cols)
	if cols <= 0 || cols%8 != 0 || cols%g != 0 {
		return badShape("INT4 needs columns divisible by 8 and by the group size %d, have %d", g, cols)
	}
	return nil
}

func (o Int4Options) group(cols int) int {
	if o.GroupSize == 0 {
		return cols
	}
	return o.GroupSize
}

func (o Int4Options) params(cols int) (kernels.Int4Params, error) {
	s := kernels.SearchMSE
	if o.Method == MethodRTN {
		s = kernels.SearchRTN
	}
	return kernels.NewInt4Params(o.group(cols), s, o.SignedScales)
}

func (o Int4Options) backend() kernels.Backend {
	if o.Backend == nil {
		return kernels.CPU{}
	}
	return o.Backend
}

// Check reports whether m names a scale search (ErrInvalidOptions if not).
func (m Method) Check() error {
	switch m {
	case MethodMSE, MethodRTN:
		return nil
	}
	return fmt.Errorf("quantize: INT4 method %q (want %q or %q): %w", m, MethodRTN, MethodMSE, ErrInvalidOptions)
}
