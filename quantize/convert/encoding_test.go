package convert

import (
	"testing"

	"pdq/quantize/report"
	"pdq/safetensors"
)

// TestEncodingsTable checks the table: every scheme a report names has one encoding, registered
// under its own name, and binding keeps the name.
func TestEncodingsTable(t *testing.T) {
	for _, s := range []Scheme{SchemeCopy, SchemeInt4, SchemeFP8Block, SchemeFP8Keep, SchemeBF16, SchemeNVFP4, SchemeMXFP4, SchemeW4AFP8} {
		e, ok := encodings[s]
		if !ok {
			t.Fatalf("scheme %q has no encoding", s)
		}
		if e.Scheme() != s {
			t.Fatalf("encoding registered as %q calls itself %q", s, e.Scheme())
		}
		w := &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "m.weight", DType: safetensors.BF16, Shape: []int64{256, 128}}}
		m := &Module{Name: "m", Linear: true, Weight: w, Rows: 256, Cols: 128}
		if b := e.Bind(m, KindDecode, &Options{GroupSize: 32}); b.Scheme() != s {
			t.Fatalf("%q bound calls itself %q", s, b.Scheme())
		}
	}
	if e := encodings[SchemePassed]; e == nil || e.Scheme() != SchemePassed {
		t.Fatalf("scheme %q has no encoding of its own", SchemePassed) // bound to packed modules only: packedsrc_internal_test.go
	}
	if len(encodings) != 9 {
		t.Fatalf("%d encodings registered, the test knows 9: add the new one above", len(encodings))
	}
}

// TestStoredBytesMatchesPlan checks report.StoredBytes, what report readers count, against the
// tensors every encoding plans for a module.
func TestStoredBytesMatchesPlan(t *testing.T) {
	for _, tc := range []struct {
		scheme          Scheme
		kind            OutputKind
		rows, cols      int
		group, reported int // plan group size, and what a report row records
		dtype           safetensors.DType
	}{
		{SchemeInt4, KindDecode, 256, 128, 32, 32, safetensors.BF16},
		{SchemeInt4, KindDecode, 2048, 7168, 128, 128, safetensors.F8E4M3},
		{SchemeInt4, KindDecode, 96, 256, PerChannel, -1, safetensors.BF16},
		{SchemeFP8Block, KindPrefill, 300, 200, 32, 0, safetensors.BF16},
		{SchemeFP8Block, KindDecode, 7168, 2048, 32, 0, safetensors.BF16},
		{SchemeFP8Keep, KindDecode, 300, 200, 32, 0, safetensors.F8E4M3},
		{SchemeBF16, KindDecode, 1536, 7168, 32, 0, safetensors.F8E4M3},
		{SchemeCopy, KindDecode, 100, 64, 32, 0, safetensors.F32},
		{SchemeNVFP4, KindDecode, 256, 128, 16, 16, safetensors.BF16},
		{SchemeNVFP4, KindDecode, 2048, 7168, 16, 16, safetensors.F8E4M3},
		{SchemeMXFP4, KindDecode, 256, 128, 32, 32, safetensors.BF16},
		{SchemeMXFP4, KindDecode, 2048, 7168, 32, 32, safetensors.F8E4M3},
		{SchemeW4AFP8, KindDecode, 2048, 7168, 128, 128, safetensors.F8E4M3},
	} {
		t.Run(string(tc.scheme)+"/"+string(tc.kind), func(t *testing.T) {
			w := &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "m.weight", DType: tc.dtype, Shape: []int64{int64(tc.rows), int64(tc.cols)}}}
			m := &Module{Name: "m", Linear: true, Weight: w, Rows: tc.rows, Cols: tc.cols}
			if tc.dtype == safetensors.F8E4M3 && tc.scheme == SchemeFP8Keep {
				m.Scale = &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "m.weight_scale_inv", DType: safetensors.F32,
					Shape: []int64{ceilDiv(int64(tc.rows), FP8BlockSize), ceilDiv(int64(tc.cols), FP8BlockSize)}}}
			}
			m.setScheme(tc.kind, tc.scheme)
			p := &Plan{Options: Options{GroupSize: tc.group}}
			var want int64
			for _, s := range p.OutputSpecs(m, tc.kind) {
				n := int64(1)
				for _, d := range s.Shape {
					n *= d
				}
				b, ok := s.DType.ByteSize(uint64(n))
				if !ok {
					t.Fatalf("%s: no size for %s", s.Name, s.DType)
				}
				want += int64(b)
			}
			r := report.TensorReport{Output: string(tc.kind), Scheme: string(tc.scheme), GroupSize: tc.reported,
				Shape: w.Shape, Elements: int64(tc.rows * tc.cols), SourceDType: string(tc.dtype)}
			if got := report.StoredBytes(&r); got != want {
				t.Fatalf("StoredBytes = %d, plan lays out %d", got, want)
			}
		})
	}
}

// TestOutputList: a module has one scheme per configured output, set and read by kind; an output
// it has no scheme for copies.
func TestOutputList(t *testing.T) {
	var m Module
	for i, kind := range outputKinds {
		if outputIndex(kind) != i {
			t.Fatalf("outputIndex(%q) = %d, want %d", kind, outputIndex(kind), i)
		}
		if m.Scheme(kind) != SchemeCopy {
			t.Fatalf("unset %s scheme is %q, want copy", kind, m.Scheme(kind))
		}
	}
	m.setScheme(KindDecode, SchemeInt4)
	m.setScheme(KindPrefill, SchemeFP8Block)
	if len(m.Schemes) != len(outputKinds) || m.Scheme(KindDecode) != SchemeInt4 || m.Scheme(KindPrefill) != SchemeFP8Block {
		t.Fatalf("schemes %v", m.Schemes)
	}
	if outputIndex("other") != -1 || m.Scheme("other") != SchemeCopy {
		t.Fatal("an unknown output kind has a place in the list")
	}
}
