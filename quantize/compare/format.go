// Package compare measures several decode formats of the routed experts side by side on the
// same source tensors, in one pass over the source: INT4 with BF16 group scales (g32, g64,
// g128, per channel) and every decode format whose registration says how to measure it
// (convert.FormatInfo.Compare). For each format it gives the error of the bytes the
// format would store (SQNR overall, per projection, per layer), the bytes the decode
// checkpoint would hold, and, given a serving setup, the weights per GPU and the KV-cache
// tokens each format leaves a decode server (the arithmetic of pdq plan).
//
// Each measurement is the conversion's own: the same slabs (convert.Slabs), the same decoded
// values (convert.SourceReader), the same quantizers and error sums, merged in the same order,
// so an INT4 figure equals the one a conversion with that group size reports for the tensor.
package compare

import (
	"errors"
	"fmt"
	"strings"

	"pdq/quantize"
	"pdq/quantize/convert"
)

// Sentinel errors.
var (
	// ErrBadFormat: a format name that is not one of Formats' (or a repeated one).
	ErrBadFormat = errors.New("unknown decode format")
	// ErrOptions: options that contradict each other or the source.
	ErrOptions = errors.New("compare: invalid options")
	// ErrUnfit: a module's shape that a format cannot take.
	ErrUnfit = errors.New("compare: module unfit for a format")
	// ErrNoModules: nothing to measure (no target module in the layers and experts chosen).
	ErrNoModules = errors.New("compare: no module to measure")
)

// Kind is the family of a format.
type Kind int

// The kinds.
const (
	KindInt4   Kind = iota // compressed-tensors pack-quantized INT4, BF16 scale per group
	KindDecode             // another decode format, measured by its registered hook (convert.CompareInfo)
)

// Format is one decode format of the routed experts.
type Format struct {
	Name  string // as given on the command line: int4-g32, int4-g128, or a decode format's name
	Kind  Kind
	Group int // elements per scale; quantize.PerChannel for INT4 with one scale per row
	// Decode is the decode format of a KindDecode format, and Info how compare measures it.
	Decode convert.DecodeFormat
	Info   *convert.CompareInfo
}

// Formats lists every format compare knows, in the order tables show them: INT4's group sizes,
// then the decode formats that register a CompareInfo, in their order.
var Formats = knownFormats()

// knownFormats builds Formats from the registry of decode formats.
func knownFormats() []Format {
	out := []Format{
		{Name: "int4-g32", Kind: KindInt4, Group: 32},
		{Name: "int4-g64", Kind: KindInt4, Group: 64},
		{Name: "int4-g128", Kind: KindInt4, Group: 128},
		{Name: "int4-channel", Kind: KindInt4, Group: quantize.PerChannel},
	}
	for _, f := range convert.Formats() {
		if f.Compare != nil {
			out = append(out, Format{Name: string(f.Format), Kind: KindDecode, Group: f.FixedGroup, Decode: f.Format, Info: f.Compare})
		}
	}
	return out
}

// DefaultFormats are the formats measured unless told otherwise: INT4 g32 (convert's default)
// and g128, and every registered decode format compare measures.
var DefaultFormats = defaultFormats()

func defaultFormats() string {
	names := []string{"int4-g32", "int4-g128"}
	for _, f := range Formats {
		if f.Kind == KindDecode {
			names = append(names, f.Name)
		}
	}
	return strings.Join(names, ",")
}

// ParseFormats parses a comma-separated list of format names (ErrBadFormat for an unknown or
// repeated one). The formats keep the order given.
func ParseFormats(s string) ([]Format, error) {
	var out []Format
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		f, ok := formatNamed(name)
		if !ok {
			return nil, fmt.Errorf("%w: %q (want some of %s)", ErrBadFormat, name, Names())
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: %q given twice", ErrBadFormat, name)
		}
		seen[f.Name] = true
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no format in %q (want some of %s)", ErrBadFormat, s, Names())
	}
	return out, nil
}

// formatNamed finds a format by name; "int4" alone is int4-g32, the conversion's default.
func formatNamed(name string) (Format, bool) {
	if name == "int4" {
		name = "int4-g32"
	}
	for _, f := range Formats {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// Names lists the format names, comma-separated.
func Names() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// width is the group width in rows of cols elements.
func (f Format) width(cols int) int { return quantize.GroupWidth(f.Group, cols) }

// Unfit says why the format cannot take a rows×cols weight ("" when it can): the columns must
// fill whole groups and whole packed words.
func (f Format) Unfit(rows, cols int) string {
	g := f.width(cols)
	switch {
	case rows <= 0 || cols <= 0:
		return fmt.Sprintf("shape %d×%d", rows, cols)
	case cols%g != 0:
		return fmt.Sprintf("in features %d not a multiple of the group size %d", cols, g)
	case f.Kind == KindInt4 && cols%8 != 0:
		return fmt.Sprintf("in features %d not a multiple of 8 (packing)", cols)
	}
	return ""
}

// BitsPerWeight is the format's stored bits per weight of a row of cols elements, scales
// included (the shape and global-scale tensors aside).
func (f Format) BitsPerWeight(cols int) float64 {
	g := float64(f.width(cols))
	if f.Kind == KindInt4 {
		return 4 + 16/g
	}
	return 4 + float64(f.Info.ScaleBits)/g
}
