package serving

import (
	"errors"
	"slices"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

// TestFormatTensors: each decode format's tensors, dtypes and shapes as compressed-tensors lays
// them out (docs/FP4.md), and the bits per weight that follow.
func TestFormatTensors(t *testing.T) {
	const n, k = 2048, 7168
	for _, tc := range []struct {
		f     convert.DecodeFormat
		group int
		want  []Tensor
		bits  float64 // per weight, the per-tensor constants left out
		fixed int64   // bytes per tensor whatever its size
	}{
		{convert.DecodeInt4, 32, []Tensor{
			{"e.weight_packed", []int64{n, k / 8}, n * k / 2},
			{"e.weight_scale", []int64{n, k / 32}, n * k / 32 * 2},
			{"e.weight_shape", []int64{2}, 16}}, 4.5, 16},
		{convert.DecodeInt4, convert.PerChannel, []Tensor{
			{"e.weight_packed", []int64{n, k / 8}, n * k / 2},
			{"e.weight_scale", []int64{n, 1}, n * 2},
			{"e.weight_shape", []int64{2}, 16}}, 4 + 16.0/k, 16},
		{convert.DecodeW4AFP8, 32, []Tensor{ // the group size of INT4 does not apply
			{"e.weight_packed", []int64{n, k / 8}, n * k / 2},
			{"e.weight_scale", []int64{n, k / 128}, n * k / 128 * 2},
			{"e.weight_shape", []int64{2}, 16}}, 4.125, 16},
		{convert.DecodeNVFP4, 32, []Tensor{
			{"e.weight_packed", []int64{n, k / 2}, n * k / 2},
			{"e.weight_scale", []int64{n, k / 16}, n * k / 16},
			{"e.weight_global_scale", []int64{1}, 4}}, 4.5, 4},
		{convert.DecodeMXFP4, 32, []Tensor{
			{"e.weight_packed", []int64{n, k / 2}, n * k / 2},
			{"e.weight_scale", []int64{n, k / 32}, n * k / 32}}, 4.25, 0},
	} {
		got, err := FormatTensors("e", tc.f, tc.group, n, k)
		if err != nil {
			t.Fatalf("%s g%d: %v", tc.f, tc.group, err)
		}
		if !slices.EqualFunc(got, tc.want, func(a, b Tensor) bool {
			return a.Name == b.Name && a.Bytes == b.Bytes && slices.Equal(a.Shape, b.Shape)
		}) {
			t.Errorf("%s g%d: %v, want %v", tc.f, tc.group, got, tc.want)
		}
		b, err := StoredBytes(tc.f, tc.group, n, k)
		if err != nil {
			t.Fatal(err)
		}
		if bits := float64(b-tc.fixed) * 8 / (n * k); bits != tc.bits {
			t.Errorf("%s g%d: %g bits per weight, want %g", tc.f, tc.group, bits, tc.bits)
		}
	}
}

// TestFormatTensorsDTypes: the dtypes behind the sizes, as FP4.md's layout table has them.
func TestFormatTensorsDTypes(t *testing.T) {
	for f, want := range map[convert.DecodeFormat][]safetensors.DType{
		convert.DecodeInt4:   {safetensors.I32, safetensors.BF16, safetensors.I64},
		convert.DecodeW4AFP8: {safetensors.I32, safetensors.BF16, safetensors.I64},
		convert.DecodeNVFP4:  {safetensors.U8, safetensors.F8E4M3, safetensors.F32},
		convert.DecodeMXFP4:  {safetensors.U8, safetensors.U8},
	} {
		ts, err := FormatTensors("e", f, 32, 256, 256)
		if err != nil {
			t.Fatal(err)
		}
		for i, tn := range ts {
			n := int64(want[i].Bits() / 8)
			for _, d := range tn.Shape {
				n *= d
			}
			if n != tn.Bytes {
				t.Errorf("%s %s: %d bytes, %d as %s", f, tn.Name, tn.Bytes, n, want[i])
			}
		}
	}
}

// TestFormatTensorsRefused: shapes a format's groups do not divide, and unknown formats.
func TestFormatTensorsRefused(t *testing.T) {
	for _, tc := range []struct {
		f    convert.DecodeFormat
		cols int64
	}{
		{convert.DecodeNVFP4, 24}, {convert.DecodeMXFP4, 48}, {convert.DecodeW4AFP8, 192},
		{convert.DecodeInt4, 48}, {"fp3", 256}, {convert.DecodeNVFP4, 0},
	} {
		if _, err := StoredBytes(tc.f, 32, 64, tc.cols); !errors.Is(err, ErrOptions) {
			t.Errorf("%s, %d columns: %v, want ErrOptions", tc.f, tc.cols, err)
		}
	}
	if b, err := StoredBytes("", 32, 64, 256); err != nil || b != 64*128+64*8*2+16 {
		t.Errorf("empty format is INT4: %d, %v", b, err)
	}
}

// TestDecodeTensorsAsHeaderOnly: the full-size Kimi-K2 decode checkpoint, planned once in INT4
// g32, re-laid out in each format: per-GPU bytes equal the hand computation with that format's
// experts, and its own format gives the plan's own tensors.
func TestDecodeTensorsAsHeaderOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("lays out a full-size header-only checkpoint")
	}
	p, sm := headerOnlyPlan(t, "kimi-k2-instruct.json")
	m, err := ModelFromConfig(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	own, err := DecodeTensorsAs(p, convert.DecodeInt4, 32)
	if err != nil {
		t.Fatal(err)
	}
	if want := Tensors(p, Decode); !slices.EqualFunc(own, want, func(a, b Tensor) bool {
		return a.Name == b.Name && a.Bytes == b.Bytes && slices.Equal(a.Shape, b.Shape)
	}) {
		t.Errorf("INT4 g32 as INT4 g32: %d tensors differ from the plan's %d", len(own), len(want))
	}
	for _, l := range []handLayout{{tp: 8, ep: 1, dp: 1}, {tp: 16, ep: 16, dp: 1}} {
		par := Parallel{TP: int(l.tp), EP: int(l.ep), DP: int(l.dp), Engine: SGLang}
		for _, f := range convert.DecodeFormats {
			ts, err := DecodeTensorsAs(p, f, 32)
			if err != nil {
				t.Fatal(err)
			}
			w, err := m.PerGPUWeights(ts, par)
			if err != nil {
				t.Fatal(err)
			}
			want := handPerGPUAs(sm, true, f, l)
			t.Logf("kimi-k2 decode %s TP%d EP%d: %.2f GiB per GPU, %.2f GiB in all", f, l.tp, l.ep, gib(w.PerGPU), gib(w.Total))
			if w.PerGPU != want {
				t.Errorf("%s TP%d EP%d: %d bytes per GPU, hand computation %d (off by %d)", f, l.tp, l.ep, w.PerGPU, want, w.PerGPU-want)
			}
		}
	}
}

// TestFormatWidthProblems: the per-rank expert width rules of the decode formats other than INT4,
// on DeepSeek-V3's 2048-wide experts.
func TestFormatWidthProblems(t *testing.T) {
	m := Model{MoEInter: 2048, Experts: 256, Heads: 128, Layers: 1}
	for _, tc := range []struct {
		f    convert.DecodeFormat
		e    Engine
		p    Parallel
		want int
	}{
		{convert.DecodeW4AFP8, VLLM, Parallel{TP: 8, EP: 1}, 0},   // 256 per rank
		{convert.DecodeW4AFP8, VLLM, Parallel{TP: 16, EP: 1}, 1},  // 128: CUTLASS W4A8 reorder needs 256
		{convert.DecodeW4AFP8, VLLM, Parallel{TP: 16, EP: 16}, 0}, // whole experts
		{convert.DecodeW4AFP8, SGLang, Parallel{TP: 16, EP: 1}, 0},
		{convert.DecodeW4AFP8, SGLang, Parallel{TP: 32, EP: 1}, 1}, // 64: not a whole group of 128
		{convert.DecodeNVFP4, SGLang, Parallel{TP: 32, EP: 1}, 0},  // 64
		{convert.DecodeNVFP4, VLLM, Parallel{TP: 64, EP: 1}, 1},    // 32: FP4 Marlin needs 64
		{convert.DecodeMXFP4, SGLang, Parallel{TP: 64, EP: 1}, 1},
		{convert.DecodeInt4, VLLM, Parallel{TP: 64, EP: 1}, 0}, // ExpertWidthProblems' job
	} {
		if got := m.FormatWidthProblems(tc.p, tc.f, tc.e); len(got) != tc.want {
			t.Errorf("%s %s TP%d EP%d: %q, want %d problem(s)", tc.f, tc.e, tc.p.TP, tc.p.EP, got, tc.want)
		}
	}
}

// TestExpertFormatsDecodeFormat: a decode checkpoint in a format other than INT4 has no INT4 group
// for the INT4 width rule, whatever Options.GroupSize holds.
func TestExpertFormatsDecodeFormat(t *testing.T) {
	for f, want := range map[convert.DecodeFormat]int{"": 32, convert.DecodeInt4: 32, convert.DecodeNVFP4: 0, convert.DecodeMXFP4: 0, convert.DecodeW4AFP8: 0} {
		p := &convert.Plan{Options: convert.Options{GroupSize: 32, DecodeFormat: f}}
		if fp8, g := ExpertFormats(p, Decode); fp8 || g != want {
			t.Errorf("%q: fp8 %v, group %d, want %d", f, fp8, g, want)
		}
	}
}

// TestFormatGPUs: plan's GPU line reads the one table, per decode format.
func TestFormatGPUs(t *testing.T) {
	for f, refused := range map[convert.DecodeFormat]int{convert.DecodeInt4: 0, convert.DecodeNVFP4: 0, convert.DecodeMXFP4: 0, convert.DecodeW4AFP8: 4} {
		cells := FormatGPUs(f)
		n := 0
		for _, c := range cells {
			if c.Format != EngineFormat(f) {
				t.Errorf("%s: cell of %s", f, c.Format)
			}
			if !c.Loads {
				n++
			}
		}
		if len(cells) != 6 || n != refused {
			t.Errorf("%s: %d cells, %d refused, want 6 and %d", f, len(cells), n, refused)
		}
	}
}
