package convert

import "pdq/safetensors"

// The names of what convert writes, in one place: the output kinds, the tensors each scheme
// writes for a module (FORMATS.md §3, §4), the tensor a report row measures, and the key of a
// report record.

// OutputKind names one of the two output checkpoints; it is also the directory name under the
// output directory and the "output" of a report row.
type OutputKind string

// The output kinds.
const (
	KindPrefill OutputKind = "prefill"
	KindDecode  OutputKind = "decode"
)

// Tensor name suffixes of a module's outputs.
const (
	suffixWeight      = ".weight"
	suffixPacked      = ".weight_packed"    // INT4 levels, eight per int32 (compressed-tensors)
	suffixScale       = ".weight_scale"     // INT4 group scales; FP8 block scales in compressed-tensors naming
	suffixScaleInv    = ".weight_scale_inv" // FP8 block scales in DeepSeek naming (the prefill checkpoint)
	suffixWeightShape = ".weight_shape"     // INT4: the unpacked [N, K]
)

// scheme is what output kind does with m.
func (m *Module) scheme(kind OutputKind) Scheme {
	if kind == KindPrefill {
		return m.Prefill
	}
	return m.Decode
}

// denseFallback is the decode scheme of a module kept out of quantization: its bytes unchanged,
// or BF16 for an FP8 weight (FP8 with its scale is a quantized form).
func (m *Module) denseFallback() Scheme {
	if m.Weight.DType == safetensors.F8E4M3 {
		return SchemeBF16
	}
	return SchemeCopy
}

// fp8ScaleName is the name of the block scales of an FP8-block tensor in output kind: the
// DeepSeek name in prefill (what SGLang's and vLLM's DeepSeek loaders read), the
// compressed-tensors name in decode.
func (m *Module) fp8ScaleName(kind OutputKind) string {
	if kind == KindPrefill {
		return m.Name + suffixScaleInv
	}
	return m.Name + suffixScale
}

// valueTensor is the tensor of output kind whose reconstruction error the report row of m
// measures, or "" when m has no row there (copied tensors).
func (m *Module) valueTensor(kind OutputKind) string {
	switch m.scheme(kind) {
	case SchemeInt4:
		if kind == KindDecode {
			return m.Name + suffixPacked
		}
	case SchemeFP8Block:
		return m.Name + suffixWeight
	case SchemeBF16:
		if kind == KindDecode {
			return m.Name + suffixWeight
		}
	}
	return ""
}

// recordKey identifies a report record: the output and the tensor it measures.
type recordKey struct {
	kind   OutputKind
	tensor string
}
