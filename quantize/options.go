package quantize

import (
	"fmt"
	"slices"

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
	// GroupSize is the number of consecutive elements of a row sharing one scale: one of
	// GroupSizes, or PerChannel (also 0) for one group per row (group = cols).
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
	// Weights, when set, makes Int4Bands measure the error on the weights an engine computes
	// with from the written bytes (a format whose kernels convert the scales at load), not on
	// the BF16 scales written; the bytes do not change. It needs GroupSize Weights.Group.
	Weights *EngineWeights
}

// EngineWeights is how an engine reads INT4 bytes back into the weights it computes with, where
// that is not the levels times the BF16 scales written (Int4Options.Weights).
type EngineWeights struct {
	// Group is the only group size the engine reads.
	Group int
	// Dequantize writes to dst the weights of rows×cols levels (packed, two per byte) and their
	// BF16 group scales.
	Dequantize func(dst []float32, packed, scales []byte, rows, cols int) error
}

// PerChannel as a group size gives one INT4 scale per output channel (the group is the row).
// The zero group size of Int4Options means the same; report rows and plans record PerChannel.
const PerChannel = -1

// GroupSizes are the INT4 group widths besides PerChannel.
var GroupSizes = []int{32, 64, 128}

// CheckGroupSize refuses a group size that is neither one of GroupSizes nor PerChannel (0 is
// PerChannel too).
func CheckGroupSize(g int) error {
	if g == 0 || g == PerChannel || slices.Contains(GroupSizes, g) {
		return nil
	}
	return fmt.Errorf("quantize: INT4 group size %d (want 32, 64 or 128, or per channel): %w", g, ErrInvalidOptions)
}

// Validate reports whether the options can quantize rows of cols elements: cols must be a
// positive multiple of 8 and of the group size.
func (o Int4Options) Validate(cols int) error {
	if err := CheckGroupSize(o.GroupSize); err != nil {
		return err
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
	if o.Weights != nil && g != o.Weights.Group {
		return fmt.Errorf("quantize: the engine's weights are read in groups of %d, not %d: %w", o.Weights.Group, g, ErrInvalidOptions)
	}
	return nil
}

// group is the group width for rows of cols elements.
func (o Int4Options) group(cols int) int { return GroupWidth(o.GroupSize, cols) }

// GroupWidth is the width of the groups of group size g in rows of cols elements: g, or cols
// per channel.
func GroupWidth(g, cols int) int {
	if g == 0 || g == PerChannel {
		return cols
	}
	return g
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
