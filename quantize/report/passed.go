package report

// Rows of scheme SchemePassed hold an already-quantized source module written through
// unchanged; their source_dtype names the source's format, which decides what is stored.
func init() {
	schemes[SchemePassed] = SchemeInfo{Family: FamilyOther, Stored: passedStored}
}

// passedStored is the size of the tensors of a module passed through in its source's format:
// pack-quantized INT4 (two values per byte, a BF16 scale per group, the weight_shape counted as
// I64, 16 bytes: a source that stores it as I32 holds 8 bytes less),
// nvfp4-pack-quantized (an e4m3 scale per 16 values, the F32 global scale) or
// mxfp4-pack-quantized (an E8M0 scale per 32 values).
func passedStored(t *TensorReport, rows, cols int64) int64 {
	switch t.SourceDType {
	case "pack-quantized":
		g := int64(t.GroupSize)
		if g <= 0 || g > cols {
			g = cols
		}
		if g <= 0 {
			return t.Elements / 2
		}
		return t.Elements/2 + rows*(cols/g)*2 + 16
	case "nvfp4-pack-quantized":
		return t.Elements/2 + t.Elements/16 + 4
	case "mxfp4-pack-quantized":
		return t.Elements/2 + t.Elements/32
	}
	return 0
}
