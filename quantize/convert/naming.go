package convert

import "pdq/safetensors"

// The names of what convert writes, in one place: the output kinds, the tensor name suffixes
// the encodings write for a module (docs/FORMATS.md), and the key of a report record.

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

// outputKinds are the outputs a conversion writes, in order: the prefill checkpoint, then the
// decode checkpoint. A module has one scheme per entry (Module.Schemes), a run one shard set per
// entry, a slab one result per entry.
var outputKinds = []OutputKind{KindPrefill, KindDecode}

// outputIndex is kind's position in outputKinds (-1 when it is none of them).
func outputIndex(kind OutputKind) int {
	for i, k := range outputKinds {
		if k == kind {
			return i
		}
	}
	return -1
}

// Scheme is what output kind does with m (SchemeCopy for an output it has no scheme for).
func (m *Module) Scheme(kind OutputKind) Scheme {
	if i := outputIndex(kind); i >= 0 && i < len(m.Schemes) {
		return m.Schemes[i]
	}
	return SchemeCopy
}

// setScheme sets what output kind does with m.
func (m *Module) setScheme(kind OutputKind, s Scheme) {
	if len(m.Schemes) < len(outputKinds) {
		m.Schemes = append(m.Schemes, make([]Scheme, len(outputKinds)-len(m.Schemes))...)
	}
	m.Schemes[outputIndex(kind)] = s
}

// denseFallback is the decode scheme of a module kept out of quantization: its bytes unchanged,
// or BF16 for an FP8 or already-quantized weight (with its scales, a quantized form).
func (m *Module) denseFallback() Scheme {
	if m.Weight.DType == safetensors.F8E4M3 || m.Packed != nil {
		return SchemeBF16
	}
	return SchemeCopy
}

// recordKey identifies a report record: the output and the tensor it measures.
type recordKey struct {
	kind   OutputKind
	tensor string
}
