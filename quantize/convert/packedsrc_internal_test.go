package convert

import (
	"testing"

	"pdq/quantize"
	"pdq/quantize/report"
	"pdq/safetensors"
)

// packedTestModule is a module of an already-quantized source of format f, 256×512.
func packedTestModule(f quantize.PackedFormat, group int, scale safetensors.DType, asym bool) *Module {
	tensor := func(suffix string, dt safetensors.DType, shape ...int64) *safetensors.Tensor {
		return &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "m" + suffix, DType: dt, Shape: shape}}
	}
	const n, k = 256, 512
	ps := &packedSource{layout: quantize.PackedLayout{Format: f, Rows: n, Cols: k, GroupSize: group, ScaleDType: scale, Asymmetric: asym}}
	switch f {
	case quantize.PackedInt4:
		ps.packed, ps.scale = tensor(suffixPacked, safetensors.I32, n, k/8), tensor(suffixScale, scale, n, int64(k/group))
		ps.shape = tensor(suffixWeightShape, safetensors.I64, 2)
		if asym {
			ps.zero = tensor(suffixZeroPoint, safetensors.I32, n/8, int64(k/group))
		}
	default:
		ps.packed, ps.scale = tensor(suffixPacked, safetensors.U8, n, k/2), tensor(suffixScale, scale, n, int64(k/group))
		if f == quantize.PackedNVFP4 {
			ps.global = tensor(suffixGlobalScale, safetensors.F32, 1)
		}
	}
	return &Module{Name: "m", Linear: true, Weight: ps.packed, Packed: ps, Rows: n, Cols: k}
}

// TestPassesThrough: a decode output passes a module through only in the source's own format
// with the same parameters.
func TestPassesThrough(t *testing.T) {
	int4 := func(g int, dt safetensors.DType, asym bool) *Module {
		return packedTestModule(quantize.PackedInt4, g, dt, asym)
	}
	for _, tc := range []struct {
		name string
		m    *Module
		o    Options
		want bool
	}{
		{"int4 g32 asked g32", int4(32, safetensors.BF16, false), Options{GroupSize: 32}, true},
		{"int4 g128 asked g128", int4(128, safetensors.BF16, false), Options{GroupSize: 128}, true},
		{"int4 g32 asked g128", int4(32, safetensors.BF16, false), Options{GroupSize: 128}, false},
		{"int4 g128 asked per channel", int4(128, safetensors.BF16, false), Options{GroupSize: PerChannel}, false},
		{"int4 asymmetric", int4(32, safetensors.BF16, true), Options{GroupSize: 32}, false},
		{"int4 F16 scales", int4(32, safetensors.F16, false), Options{GroupSize: 32}, false},
		{"int4 asked nvfp4", int4(32, safetensors.BF16, false), Options{GroupSize: 32, DecodeFormat: DecodeNVFP4}, false},
		{"int4 g128 asked w4afp8", int4(128, safetensors.BF16, false), Options{GroupSize: 128, DecodeFormat: DecodeW4AFP8}, true},
		{"int4 g32 asked w4afp8", int4(32, safetensors.BF16, false), Options{GroupSize: 32, DecodeFormat: DecodeW4AFP8}, false},
		{"nvfp4 asked nvfp4", packedTestModule(quantize.PackedNVFP4, 16, "", false), Options{DecodeFormat: DecodeNVFP4}, true},
		{"nvfp4 asked int4", packedTestModule(quantize.PackedNVFP4, 16, "", false), Options{GroupSize: 32}, false},
		{"mxfp4 asked mxfp4", packedTestModule(quantize.PackedMXFP4, 32, "", false), Options{DecodeFormat: DecodeMXFP4}, true},
		{"mxfp4 asked nvfp4", packedTestModule(quantize.PackedMXFP4, 32, "", false), Options{DecodeFormat: DecodeNVFP4}, false},
		{"modelopt asked nvfp4", packedTestModule(quantize.PackedModelOptNVFP4, 16, "", false), Options{DecodeFormat: DecodeNVFP4}, false},
	} {
		if tc.m.Packed.scale.DType == "" {
			tc.m.Packed.scale.DType = safetensors.F8E4M3
			if tc.m.Packed.layout.Format == quantize.PackedMXFP4 {
				tc.m.Packed.scale.DType = safetensors.U8
			}
		}
		if got := passesThrough(tc.m.Packed, &tc.o); got != tc.want {
			t.Errorf("%s: passesThrough = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPassedStoredBytes: report.StoredBytes of a passed row is the size of the tensors the
// pass-through plans.
func TestPassedStoredBytes(t *testing.T) {
	for _, m := range []*Module{
		packedTestModule(quantize.PackedInt4, 32, safetensors.BF16, false),
		packedTestModule(quantize.PackedInt4, 128, safetensors.BF16, false),
		packedTestModule(quantize.PackedNVFP4, 16, safetensors.F8E4M3, false),
		packedTestModule(quantize.PackedMXFP4, 32, safetensors.U8, false),
	} {
		m.setScheme(KindDecode, SchemePassed)
		b := encodings[SchemePassed].Bind(m, KindDecode, &Options{GroupSize: m.Packed.layout.GroupSize})
		var want int64
		for _, s := range b.Specs() {
			n := int64(1)
			for _, d := range s.Shape {
				n *= d
			}
			sz, _ := s.DType.ByteSize(uint64(n))
			want += int64(sz)
		}
		r := newTensorReport(KindDecode, m, b.ValueTensor(), SchemePassed, quantize.Metrics{N: int64(m.Rows * m.Cols)})
		if got := report.StoredBytes(&r); got != want {
			t.Errorf("%s g%d: StoredBytes = %d, the pass-through plans %d", m.Packed.layout.Format, m.Packed.layout.GroupSize, got, want)
		}
	}
}

// TestPackedCost: the encodings cost an already-quantized module by its values, not by its
// packed elements (eight per I32 word, two per byte), so that parts balance.
func TestPackedCost(t *testing.T) {
	o := &Options{GroupSize: 32, Method: quantize.MethodRTN}
	for _, s := range []Scheme{SchemeInt4, SchemeFP8Block, SchemeBF16} {
		packed := packedTestModule(quantize.PackedInt4, 32, safetensors.BF16, false)
		w := &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "m.weight", DType: safetensors.BF16, Shape: []int64{256, 512}}}
		dense := &Module{Name: "m", Linear: true, Weight: w, Rows: 256, Cols: 512}
		a, b := encodings[s].Bind(packed, KindDecode, o).Cost(), encodings[s].Bind(dense, KindDecode, o).Cost()
		if a != b || a <= 0 {
			t.Errorf("%s: cost %g for the packed module, %g for the dense one", s, a, b)
		}
	}
}

// FuzzInspectPacked: any dtypes and shapes of a packed module's tensors give a layout that fits
// the packed tensor (rows, and the bytes of a row of values) or an error, never a panic.
func FuzzInspectPacked(f *testing.F) {
	f.Add(uint8(0), int64(64), int64(16), uint8(1), int64(64), int64(4), int64(2), true, false)
	f.Add(uint8(2), int64(64), int64(64), uint8(3), int64(64), int64(8), int64(1), false, true)
	dtypes := []safetensors.DType{safetensors.I32, safetensors.I64, safetensors.U8, safetensors.F8E4M3, safetensors.BF16, safetensors.F32, safetensors.U8, safetensors.F16}
	f.Fuzz(func(t *testing.T, pdt uint8, p0, p1 int64, sdt uint8, s0, s1, extra int64, zero, modelopt bool) {
		tensor := func(name string, dt safetensors.DType, shape ...int64) *safetensors.Tensor {
			return &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: dt, Shape: shape}}
		}
		byName := map[string]*safetensors.Tensor{}
		add := func(x *safetensors.Tensor) { byName[x.Name] = x }
		packed := tensor("m"+suffixPacked, dtypes[int(pdt)%len(dtypes)], p0, p1)
		f := quantize.PackedInt4
		switch {
		case modelopt:
			packed.Name, f = "m"+suffixWeight, quantize.PackedModelOptNVFP4
			add(tensor("m"+suffixScale2, safetensors.F32, extra))
		case packed.DType == safetensors.U8 && zero:
			f = quantize.PackedNVFP4
			add(tensor("m"+suffixGlobalScale, safetensors.F32, extra))
		case packed.DType == safetensors.U8:
			f = quantize.PackedMXFP4
		default:
			add(tensor("m"+suffixWeightShape, safetensors.I64, extra))
			if zero {
				add(tensor("m"+suffixZeroPoint, safetensors.I32, (p0+7)/8, s1))
			}
		}
		add(packed)
		add(tensor("m"+suffixScale, dtypes[int(sdt)%len(dtypes)], s0, s1))
		ps, err := inspectPacked(f, "m", packed, byName)
		if err != nil {
			return
		}
		l := ps.layout
		if int64(l.Rows) != p0 || l.Cols <= 0 || int64(l.Cols) != 2*p1*int64(packed.DType.Bits()/8) || l.GroupSize <= 0 || l.Cols%l.GroupSize != 0 {
			t.Fatalf("layout %+v for packed %s %v", l, packed.DType, packed.Shape)
		}
	})
}
