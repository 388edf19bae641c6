package report

import "pdq/internal/floatcodec"

// What a reader of report.json needs to know about each scheme, in one table: how it is grouped
// in plots and the worst list, and how many bytes an output stores for a row. The conversion's
// encodings (package convert) write these layouts; a test there checks StoredBytes against the
// tensors each encoding plans.

// Scheme says what an output does with one source module.
type Scheme string

// The schemes every conversion may write. The decode formats beyond INT4 name their schemes in
// their own files (package convert), which register them here (RegisterScheme).
const (
	SchemeCopy     Scheme = "copy"      // bytes unchanged
	SchemeInt4     Scheme = "int4"      // compressed-tensors pack-quantized group INT4
	SchemeFP8Block Scheme = "fp8-block" // FP8 e4m3 with 128x128 block scales, quantized from dense values
	SchemeFP8Keep  Scheme = "fp8-keep"  // FP8 source blocks kept as they are (renamed for compressed-tensors)
	SchemeBF16     Scheme = "bf16"      // dequantized to BF16
	SchemePassed   Scheme = "passed"    // an already-quantized source tensor set written through unchanged
)

// Family groups schemes for plots: the encodings of one family share a colour.
type Family int

// The families.
const (
	FamilyOther Family = iota // copied bytes, unknown schemes
	FamilyInt4                // INT4 groups
	FamilyFP8                 // FP8 blocks
	FamilyDense               // BF16 values
	FamilyFP4                 // FP4 (E2M1) groups
)

// SchemeInfo describes one scheme to readers of reports.
type SchemeInfo struct {
	// Family is the plot group.
	Family Family
	// Quantized reports a scheme quantized by pdq from dense values: its rows are ranked in the
	// worst list.
	Quantized bool
	// Stored is the size of the tensors an output holds for a row of rows×cols values
	// (elements n) in the plan's layout.
	Stored func(t *TensorReport, rows, cols int64) int64
}

// schemes is the table, one entry per scheme.
var schemes = map[Scheme]SchemeInfo{
	SchemeInt4:     {Family: FamilyInt4, Quantized: true, Stored: int4Stored},
	SchemeFP8Block: {Family: FamilyFP8, Quantized: true, Stored: fp8Stored},
	SchemeFP8Keep:  {Family: FamilyFP8, Stored: fp8Stored},
	SchemeBF16: {Family: FamilyDense, Stored: func(t *TensorReport, _, _ int64) int64 {
		return 2 * t.Elements
	}},
	SchemeCopy: {Family: FamilyOther, Stored: func(t *TensorReport, _, _ int64) int64 {
		return t.Elements * dtypeBytes(t.SourceDType) // the source's dtype
	}},
}

// int4Stored: two values per byte, a BF16 scale per group, the 16-byte shape tensor.
func int4Stored(t *TensorReport, rows, cols int64) int64 {
	g := int64(t.GroupSize)
	if g <= 0 || g > cols {
		g = cols
	}
	groups := int64(0)
	if g > 0 {
		groups = rows * (cols / g)
	}
	return t.Elements/2 + groups*2 + 16
}

// fp8Stored: one byte per value and an F32 scale per FP8BlockSize×FP8BlockSize block.
func fp8Stored(t *TensorReport, rows, cols int64) int64 {
	b := int64(floatcodec.FP8Block)
	return t.Elements + (rows+b-1)/b*((cols+b-1)/b)*4
}

// RegisterScheme adds scheme s to the table; a scheme registered twice, or without a Stored
// function, is a programming error.
func RegisterScheme(s Scheme, info SchemeInfo) {
	if _, dup := schemes[s]; dup || info.Stored == nil {
		panic("report: scheme " + string(s) + " registered twice or without its stored bytes")
	}
	schemes[s] = info
}

// Lookup returns what the table says about scheme s, and whether it knows s.
func Lookup(s Scheme) (SchemeInfo, bool) {
	info, ok := schemes[s]
	return info, ok
}

// Info returns what the table says about scheme s (the zero SchemeInfo, FamilyOther, when s is
// unknown).
func Info(s Scheme) SchemeInfo { return schemes[s] }

// StoredBytes is the size of the tensors an output holds for row t, as the plan lays them out.
// Unknown schemes count zero.
func StoredBytes(t *TensorReport) int64 {
	info, ok := schemes[Scheme(t.Scheme)]
	if !ok {
		return 0
	}
	rows, cols := int64(1), t.Elements
	if len(t.Shape) == 2 {
		rows, cols = t.Shape[0], t.Shape[1]
	}
	return info.Stored(t, rows, cols)
}

// dtypeBytes is the width of a safetensors dtype named in a report, 0 when unknown.
func dtypeBytes(dt string) int64 {
	switch dt {
	case "F64", "I64", "U64":
		return 8
	case "F32", "I32", "U32":
		return 4
	case "BF16", "F16", "I16", "U16":
		return 2
	case "F8_E4M3", "F8_E5M2", "I8", "U8", "BOOL":
		return 1
	}
	return 0
}
