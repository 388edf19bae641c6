// Package compare measures several decode formats of the routed experts side by side on the
// same source tensors, in one pass over the source: INT4 with BF16 group scales (g32, g64,
// g128, per channel), NVFP4 and MXFP4. For each format it gives the error of the bytes the
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

	"pdq/kernels"
	"pdq/quantize"
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
	KindInt4  Kind = iota // compressed-tensors pack-quantized INT4, BF16 scale per group
	KindNVFP4             // nvfp4-pack-quantized: E2M1, e4m3 scale per 16, F32 global scale
	KindMXFP4             // mxfp4-pack-quantized: E2M1, E8M0 scale per 32
)

// Format is one decode format of the routed experts.
type Format struct {
	Name  string // as given on the command line: int4-g32, int4-g128, nvfp4, mxfp4, ...
	Kind  Kind
	Group int // elements per scale; quantize.PerChannel for INT4 with one scale per row
}

// Formats lists every format compare knows, in the order tables show them.
var Formats = []Format{
	{"int4-g32", KindInt4, 32},
	{"int4-g64", KindInt4, 64},
	{"int4-g128", KindInt4, 128},
	{"int4-channel", KindInt4, quantize.PerChannel},
	{"nvfp4", KindNVFP4, kernels.NVFP4GroupSize},
	{"mxfp4", KindMXFP4, kernels.MXFP4GroupSize},
}

// DefaultFormats are the formats measured unless told otherwise.
const DefaultFormats = "int4-g32,int4-g128,nvfp4,mxfp4"

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
	return 4 + 8/g
}
