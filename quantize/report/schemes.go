package report

import "pdq/internal/floatcodec"

// What a reader of report.json needs to know about each scheme, in one table: how it is grouped
// in plots and the worst list, and how many bytes an output stores for a row. The conversion's
// encodings (package convert) write these layouts; a test there checks StoredBytes against the
// tensors each encoding plans.

// Scheme says what an output does with one source module.
type Scheme string

// The schemes.
const (
	SchemeCopy     Scheme = "copy"      // bytes unchanged
	SchemeInt4     Scheme = "int4"      // compressed-tensors pack-quantized group INT4
	SchemeFP8Block Scheme = "fp8-block" // FP8 e4m3 with 128x128 block scales, quantized from dense values
	SchemeFP8Keep  Scheme = "fp8-keep"  // FP8 source blocks kept as they are (renamed for compressed-tensors)
	SchemeBF16     Scheme = "bf16"      // dequantized to BF16
	SchemeNVFP4    Scheme = "nvfp4"     // compressed-tensors nvfp4-pack-quantized (E2M1, e4m3 scale per 16, global scale)
	SchemeMXFP4    Scheme = "mxfp4"     // compressed-tensors mxfp4-pack-quantized (E2M1, E8M0 scale per 32)
	SchemeW4AFP8   Scheme = "w4afp8"    // INT4 g128 symmetric weights with dynamic per-token FP8 activations
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
	FamilyFP4                 // FP4 (E2M1) groups: NVFP4, MXFP4
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
	SchemeInt4:   {Family: FamilyInt4, Quantized: true, Stored: int4Stored},
	SchemeW4AFP8: {Family: FamilyInt4, Quantized: true, Stored: int4Stored}, // INT4 g128 tensors
	SchemeNVFP4: {Family: FamilyFP4, Quantized: true, Stored: func(t *TensorReport, rows, cols int64) int64 {
		// Two values per byte, an e4m3 scale per 16, the F32 global scale.
		return t.Elements/2 + rows*(cols/16) + 4
	}},
	SchemeMXFP4: {Family: FamilyFP4, Quantized: true, Stored: func(t *TensorReport, rows, cols int64) int64 {
		// Two values per byte, an E8M0 exponent per 32.
		return t.Elements/2 + rows*(cols/32)
	}},
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
