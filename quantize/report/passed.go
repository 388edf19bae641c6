package report

// Rows of scheme SchemePassed hold an already-quantized source module written through
// unchanged; their source_dtype names the source's format, which decides what is stored.
func init() {
	schemes[SchemePassed] = SchemeInfo{Family: FamilyOther, Stored: passedStored}
}

// passedFormats maps the compressed-tensors format of a source passed through (its rows'
// source_dtype) to the scheme that writes the same tensors (RegisterPassedFormat).
var passedFormats = map[string]Scheme{}

// RegisterPassedFormat says that a module passed through from a source in compressed-tensors
// format ctFormat stores what scheme s stores. A format registered again keeps its first scheme.
func RegisterPassedFormat(ctFormat string, s Scheme) {
	if _, ok := passedFormats[ctFormat]; !ok {
		passedFormats[ctFormat] = s
	}
}

// passedStored is the size of the tensors of a module passed through in its source's format:
// pack-quantized INT4 (two values per byte, a BF16 scale per group, the weight_shape counted as
// I64, 16 bytes: a source that stores it as I32 holds 8 bytes less), or what the scheme
// registered for the source's format stores.
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
	}
	if s, ok := passedFormats[t.SourceDType]; ok && schemes[s].Stored != nil {
		return schemes[s].Stored(t, rows, cols)
	}
	return 0
}
