package convert

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"pdq/quantize"
	"pdq/quantize/engines"
	"pdq/quantize/report"
	"pdq/safetensors"
)

// FormatInfo is what pdq knows of one decode format beyond its encoding, in the format's own
// file: its names, the help that describes it, the group size it fixes, the tensors it stores,
// its report entry, the engines' name for its config group, and how pdq compare measures it.
// The command line, the report, verify, the serving plan and compare read the registry
// (Formats, FormatOf) and never switch on a format's name. docs/ARCHITECTURE.md walks through
// adding one.
type FormatInfo struct {
	// Format is the value of Options.DecodeFormat (and of --decode-format).
	Format DecodeFormat
	// Title names the format in prose ("INT4").
	Title string
	// Scheme is the encoding of the decode output's targets in the format.
	Scheme Scheme
	// Layout says in one line what the format stores (the help of --decode-format).
	Layout string
	// GPUs says in one line where the engines run it (engines.SupportTable has the rules).
	GPUs string
	// FixedGroup is the group size the format fixes, 0 when Options.GroupSize chooses it.
	FixedGroup int
	// Engine is the format of its config group as the engines' rules name it.
	Engine engines.Format
	// Report is the report's entry for Scheme (report.Info); registering the format registers it
	// there unless the report knows the scheme already.
	Report report.SchemeInfo
	// Tensors lists the tensors a rows×cols Linear weight is stored as with groups of group
	// columns (the whole row per channel), by name suffix.
	Tensors func(rows, cols, group int64) []TensorShape
	// Compare, when set, is how pdq compare measures the format; nil when compare does not
	// list it (INT4 has its own group sizes there).
	Compare *CompareInfo
	// Refusal, when set, is the sentinel of the module shapes the format's kernels refuse
	// (wrapping ErrUnsupported), and RefusedBy names those kernels ("vLLM's W4A8 kernels").
	Refusal   error
	RefusedBy string

	// rank orders the formats in help and errors (lowest first).
	rank int
	// widthRule, when set, is the multiple of moe_intermediate_size per TP rank the engines need
	// of the format under options o, and what to call it in the plan's warning (mult 0: none).
	widthRule func(o *Options) (what string, mult int)
}

// TensorShape is one tensor of a stored format: its name suffix, dtype and shape.
type TensorShape struct {
	Suffix string
	DType  safetensors.DType
	Shape  []int64
}

// Bytes is the size of the tensor.
func (t TensorShape) Bytes() int64 {
	n := int64(t.DType.Bits() / 8)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// CompareInfo is how pdq compare measures a decode format on the same slabs as the conversion.
type CompareInfo struct {
	// Doc describes the format in one phrase for compare's help ("E2M1 in groups of 32 ...").
	Doc string
	// Note, when set, is a sentence compare's help adds about how the format is measured.
	Note string
	// ScaleBits is the width of one group scale (bits per weight: 4 + ScaleBits/group).
	ScaleBits int
	// Shared, when set, is the scale an expert's gate and up projections share, from the
	// largest magnitude of their values together (compare reads them first to find it).
	Shared func(amax float32) float32
	// Measure quantizes a slab of rows×cols values (the module's first row firstRow, its first
	// element first) with method and adds the error of the bytes it gives to met; shared is the
	// Shared scale of the slab's unit (0 without one).
	Measure func(ctx context.Context, met *quantize.Metrics, vals []float32, rows, cols, firstRow int, first int64, method quantize.Method, shared float32) error
}

// formats is the registry, in rank order; DecodeFormats lists its names.
var formats []*FormatInfo

// registerFormat adds decode format f to the registry (its report entry too, and its
// compressed-tensors format as one whose sources pass through); its encoding must be registered
// first. A format registered twice is a programming error.
func registerFormat(f FormatInfo, rank int) {
	if _, dup := FormatOf(f.Format); dup {
		panic("convert: decode format " + string(f.Format) + " registered twice")
	}
	f.rank = rank
	formats = append(formats, &f)
	slices.SortStableFunc(formats, func(a, b *FormatInfo) int { return a.rank - b.rank })
	DecodeFormats = DecodeFormats[:0]
	for _, g := range formats {
		DecodeFormats = append(DecodeFormats, g.Format)
	}
	if _, known := report.Lookup(f.Scheme); !known {
		report.RegisterScheme(f.Scheme, f.Report)
	}
	// A source in the format's compressed-tensors layout passes through as the same tensors.
	if g, ok := encodings[f.Scheme].(ctGrouped); ok {
		_, name, _ := g.ctGroup(&Options{DecodeFormat: f.Format, GroupSize: f.FixedGroup})
		report.RegisterPassedFormat(name, f.Scheme)
	}
}

// Formats returns the decode formats' descriptions in the order help and errors name them.
func Formats() []FormatInfo {
	out := make([]FormatInfo, len(formats))
	for i, f := range formats {
		out[i] = *f
	}
	return out
}

// FormatOf returns decode format f's description ("" is DecodeInt4); ok is false for a format
// not registered.
func FormatOf(f DecodeFormat) (FormatInfo, bool) {
	if f == "" {
		f = DecodeInt4
	}
	for _, g := range formats {
		if g.Format == f {
			return *g, true
		}
	}
	return FormatInfo{}, false
}

// IsTargetScheme reports whether scheme s is a decode format's (a target of the decode output)
// or SchemePassed (a target passed through from an already-quantized source).
func IsTargetScheme(s Scheme) bool {
	if s == SchemePassed {
		return true
	}
	return slices.ContainsFunc(formats, func(f *FormatInfo) bool { return f.Scheme == s })
}

// FormatList joins the decode formats' names (title false) or titles with commas, the last
// two with conj: "a, b or c" for conj "or".
func FormatList(title bool, conj string) string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f.Format)
		if title {
			names[i] = f.Title
		}
	}
	return joinList(names, conj)
}

// joinList joins words with commas, the last two with conj ("a, b and c").
func joinList(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

// storedFrom is a report Stored function from a format's tensors with groups of group columns.
func storedFrom(tensors func(rows, cols, group int64) []TensorShape, group int64) func(t *report.TensorReport, rows, cols int64) int64 {
	return func(_ *report.TensorReport, rows, cols int64) int64 {
		var n int64
		for _, s := range tensors(rows, cols, group) {
			n += s.Bytes()
		}
		return n
	}
}

// errFormat is the error of an unknown decode format.
func errFormat(f DecodeFormat) error {
	return fmt.Errorf("%w: decode format %q (want %s)", ErrBadOptions, f, FormatList(false, "or"))
}
