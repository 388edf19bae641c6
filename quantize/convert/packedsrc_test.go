package convert_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/quantize/report"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// kimiSource is a Kimi-K2.6-style checkpoint: routed experts in compressed-tensors
// pack-quantized INT4, symmetric, groups of 32; everything else BF16 (shared, read-only).
func kimiSource(t testing.TB) string {
	return shared(t, "kimi-int4", func(dir string) error {
		return generateInto(dir, synth.Options{Model: synth.Tiny(synth.StyleDeepSeek), Seed: 3, MaxShardBytes: 1 << 20,
			ExpertFormat: synth.ExpertsInt4, ExpertGroup: 32})
	})
}

// fp4Source is a checkpoint whose routed experts are nvfp4- or mxfp4-pack-quantized (shared).
func fp4Source(t testing.TB, format string) string {
	return shared(t, "experts-"+format, func(dir string) error {
		return generateInto(dir, synth.Options{Model: synth.Tiny(synth.StyleDeepSeek), Seed: 4, MaxShardBytes: 1 << 20, ExpertFormat: format})
	})
}

// dequantInt4 is an independent reading of a symmetric pack-quantized INT4 weight: nibble
// q+8 of element i at bit 4(i%8) of little-endian word i/8, value q·bf16 scale of its group.
func dequantInt4(packed, scales []byte, rows, cols, g int) []float32 {
	w := make([]float32, rows*cols)
	for r := range rows {
		for c := range cols {
			i := r*cols + c
			word := binary.LittleEndian.Uint32(packed[4*(i/8):])
			q := int32(word>>(4*(i%8))&15) - 8
			s := math.Float32frombits(uint32(binary.LittleEndian.Uint16(scales[2*(r*(cols/g)+c/g):])) << 16)
			w[i] = float32(q) * s
		}
	}
	return w
}

// e2m1Value is the value of an E2M1 code.
func e2m1Value(c byte) float32 {
	v := [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// dequantFP4 is an independent reading of an nvfp4 (global > 0: scale e4m3/global, groups of
// 16) or mxfp4 (scale 2^(c−127), groups of 32) pack-quantized weight.
func dequantFP4(packed, scales []byte, global float32, rows, cols int) []float32 {
	g := 32
	if global > 0 {
		g = 16
	}
	w := make([]float32, rows*cols)
	for i := range w {
		b := packed[i/2] >> (4 * (i % 2)) & 15
		sc := scales[(i/cols)*(cols/g)+(i%cols)/g]
		var s float32
		if global > 0 {
			s = safetensors.F8E4M3ToFloat32(sc) / global
		} else {
			s = float32(math.Ldexp(1, int(sc)-127))
		}
		w[i] = e2m1Value(b) * s
	}
	return w
}

// checkPrefillOfDequantized checks that every routed expert of the prefill output is FP8 blocks
// of the source's weights as deq reads them, and returns the number checked.
func checkPrefillOfDequantized(t *testing.T, srcT, pre map[string]*tensor, deq func(module string, rows, cols int) []float32) int {
	t.Helper()
	n := 0
	for name, x := range srcT {
		module, ok := strings.CutSuffix(name, ".weight_packed")
		if !ok {
			continue
		}
		rows, cols := int(x.Shape[0]), int(x.Shape[1])*2
		if x.DType == safetensors.I32 {
			cols = int(x.Shape[1]) * 8
		}
		want, err := quantize.QuantizeFP8Block(context.Background(), deq(module, rows, cols), rows, cols, quantize.FP8Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		w, s := pre[module+".weight"], pre[module+".weight_scale_inv"]
		if w == nil || s == nil || w.DType != safetensors.F8E4M3 {
			t.Fatalf("prefill has no FP8 %s.weight with its scale", module)
		}
		if string(w.Raw) != string(want.Data) {
			t.Fatalf("%s: prefill FP8 codes are not those of the dequantized source", module)
		}
		for i, v := range want.ScaleInv {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(s.Raw[4*i:])); got != v {
				t.Fatalf("%s: block scale %d is %v, want %v", module, i, got, v)
			}
		}
		n++
	}
	return n
}

// TestKimiInt4Source is the acceptance of an already-quantized INT4 source: converted with the
// defaults (INT4, groups of 32), the decode checkpoint holds the source's INT4 tensors byte for
// byte, the report lists them as passed, the prefill checkpoint holds FP8 blocks of the exactly
// dequantized weights, and verify accepts both outputs.
func TestKimiInt4Source(t *testing.T) {
	src := kimiSource(t)
	out := filepath.Join(t.TempDir(), "out")
	rep := convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
	srcT := readTensors(t, src)
	dec := readTensors(t, filepath.Join(out, "decode"))
	pre := readTensors(t, filepath.Join(out, "prefill"))

	experts := 0
	for name, x := range srcT {
		module, suffix, _ := strings.Cut(name, ".weight")
		if !strings.Contains(module, ".experts.") {
			if d := dec[name]; suffix == "" && x.DType == safetensors.BF16 && (d == nil || string(d.Raw) != string(x.Raw)) {
				t.Errorf("decode: dense %s is not the source's BF16", name)
			}
			continue
		}
		d := dec[name]
		if d == nil || d.DType != x.DType || string(d.Raw) != string(x.Raw) {
			t.Fatalf("decode: %s is not byte-identical to the source's", name)
		}
		if suffix == "_packed" {
			experts++
		}
	}
	if experts == 0 {
		t.Fatal("the source has no packed experts")
	}
	checked := checkPrefillOfDequantized(t, srcT, pre, func(module string, rows, cols int) []float32 {
		return dequantInt4(srcT[module+".weight_packed"].Raw, srcT[module+".weight_scale"].Raw, rows, cols, 32)
	})
	if checked != experts {
		t.Fatalf("checked %d prefill experts of %d", checked, experts)
	}

	passed := 0
	for _, r := range rep.Tensors {
		if r.Output == "decode" && r.Scheme == string(report.SchemePassed) {
			passed++
			if r.SourceDType != "pack-quantized" || r.GroupSize != 32 || !math.IsInf(float64(r.SQNR), 1) {
				t.Errorf("passed row %s: source %q group %d SQNR %v", r.Tensor, r.SourceDType, r.GroupSize, r.SQNR)
			}
		}
	}
	summed := 0
	for _, s := range rep.Summary {
		if s.Output == "decode" && s.Scheme == string(report.SchemePassed) {
			summed += s.Tensors
		}
	}
	if passed != experts || summed != experts {
		t.Fatalf("report: %d passed rows, summary counts %d, want %d", passed, summed, experts)
	}
	cfg, err := rules.LoadConfig(filepath.Join(out, "decode"))
	if err != nil {
		t.Fatal(err)
	}
	qc := cfg["quantization_config"].(map[string]any)
	w := qc["config_groups"].(map[string]any)["group_0"].(map[string]any)["weights"].(map[string]any)
	if gs, _ := rules.IntOf(w["group_size"]); qc["format"] != "pack-quantized" || gs != 32 {
		t.Fatalf("decode config: format %v, group size %v", qc["format"], w["group_size"])
	}
	for _, kind := range []string{"decode", "prefill"} {
		v := verifyDir(t, src, filepath.Join(out, kind))
		if !v.OK() || !v.ReportChecked {
			t.Fatalf("verify %s: %v (report checked: %v)", kind, v.Problems, v.ReportChecked)
		}
	}
}

// TestKimiInt4Requantized: asked another group size, the INT4 experts are re-quantized from the
// exactly decoded source (nothing passes through), and verify measures them against it.
func TestKimiInt4Requantized(t *testing.T) {
	src := kimiSource(t)
	out := filepath.Join(t.TempDir(), "out")
	rep := convertTo(t, src, out, convert.Options{GroupSize: 128, Only: convert.KindDecode}, convert.RunOptions{Workers: 2})
	int4 := 0
	for _, r := range rep.Tensors {
		switch r.Scheme {
		case string(report.SchemePassed):
			t.Fatalf("%s passed through at group size 128", r.Tensor)
		case string(report.SchemeInt4):
			int4++
			if r.SourceDType != "pack-quantized" || float64(r.SQNR) < 15 {
				t.Errorf("%s: source %q, SQNR %v", r.Tensor, r.SourceDType, r.SQNR)
			}
		}
	}
	if int4 == 0 {
		t.Fatal("no INT4 rows")
	}
	if v := verifyDir(t, src, filepath.Join(out, "decode")); !v.OK() {
		t.Fatalf("verify: %v", v.Problems)
	}
}

// TestFP4Sources: nvfp4- and mxfp4-pack-quantized experts decode exactly: the prefill output
// holds FP8 blocks of the independently dequantized weights, the decode output INT4 of them.
func TestFP4Sources(t *testing.T) {
	for _, format := range []string{synth.ExpertsNVFP4, synth.ExpertsMXFP4} {
		t.Run(format, func(t *testing.T) {
			src := fp4Source(t, format)
			out := filepath.Join(t.TempDir(), "out")
			convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
			srcT := readTensors(t, src)
			pre := readTensors(t, filepath.Join(out, "prefill"))
			n := checkPrefillOfDequantized(t, srcT, pre, func(module string, rows, cols int) []float32 {
				var global float32
				if g := srcT[module+".weight_global_scale"]; g != nil {
					global = math.Float32frombits(binary.LittleEndian.Uint32(g.Raw))
				}
				return dequantFP4(srcT[module+".weight_packed"].Raw, srcT[module+".weight_scale"].Raw, global, rows, cols)
			})
			if n == 0 {
				t.Fatal("no packed experts")
			}
			for _, kind := range []string{"decode", "prefill"} {
				if v := verifyDir(t, src, filepath.Join(out, kind)); !v.OK() {
					t.Fatalf("verify %s: %v", kind, v.Problems)
				}
			}
		})
	}
}

// TestPackedSourceBands: an already-quantized source cut into bands gives the bytes of whole
// slabs (the companions' rows follow the bands), with one worker or two.
func TestPackedSourceBands(t *testing.T) {
	for _, format := range []string{synth.ExpertsInt4, synth.ExpertsNVFP4} {
		t.Run(format, func(t *testing.T) {
			src := shared(t, "banded-"+format, func(dir string) error {
				m := synth.Tiny(synth.StyleDeepSeek)
				m.Hidden, m.MoEIntermediate, m.Experts, m.Layers, m.Vocab = 1024, 512, 2, 2, 256
				return generateInto(dir, synth.Options{Model: m, Seed: 5, MaxShardBytes: 1 << 20, ExpertFormat: format})
			})
			before := convert.BandSlabs()
			banded := filepath.Join(t.TempDir(), "banded")
			convertTo(t, src, banded, convert.Options{}, convert.RunOptions{Workers: 2})
			if convert.BandSlabs() == before {
				t.Fatal("no slab was cut into bands")
			}
			restore := convert.SetWholeSlabs(true)
			whole := filepath.Join(t.TempDir(), "whole")
			convertTo(t, src, whole, convert.Options{}, convert.RunOptions{Workers: 1})
			restore()
			sameFiles(t, "banded vs whole", outputFiles(t, banded), outputFiles(t, whole))
			if v := verifyDir(t, src, filepath.Join(banded, "prefill")); !v.OK() {
				t.Fatalf("verify: %v", v.Problems)
			}
		})
	}
}

// TestFP4SourcePassThrough: asked the source's own FP4 format, the decode checkpoint holds the
// source's tensors byte for byte, one passed row each. It runs once the format's encoding is
// registered (until then the plan refuses the format, and the test says so).
func TestFP4SourcePassThrough(t *testing.T) {
	for _, tc := range []struct {
		format string
		asked  convert.DecodeFormat
	}{{synth.ExpertsNVFP4, convert.DecodeNVFP4}, {synth.ExpertsMXFP4, convert.DecodeMXFP4}} {
		t.Run(tc.format, func(t *testing.T) {
			src := fp4Source(t, tc.format)
			o := convert.Options{DecodeFormat: tc.asked, Only: convert.KindDecode}
			p, err := tryPlan(t, src, o)
			if errors.Is(err, convert.ErrBadOptions) && strings.Contains(err.Error(), "not built yet") {
				t.Skipf("decode format %s has no encoding yet: %v", tc.asked, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			rep, err := runPlan(p, out, convert.RunOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			srcT, dec := readTensors(t, src), readTensors(t, filepath.Join(out, "decode"))
			n := 0
			for name, x := range srcT {
				if !strings.Contains(name, ".experts.") {
					continue
				}
				if d := dec[name]; d == nil || d.DType != x.DType || string(d.Raw) != string(x.Raw) {
					t.Fatalf("decode: %s is not byte-identical to the source's", name)
				}
				n++
			}
			passed := 0
			for _, r := range rep.Tensors {
				if r.Scheme == string(report.SchemePassed) {
					passed++
				}
			}
			if n == 0 || passed == 0 {
				t.Fatalf("%d expert tensors compared, %d passed rows", n, passed)
			}
			if v := verifyDir(t, src, filepath.Join(out, "decode")); !v.OK() || !v.ReportChecked {
				t.Fatalf("verify: %v (report checked: %v)", v.Problems, v.ReportChecked)
			}
		})
	}
}

// TestPackedSourceSchemes: an already-quantized module is never copied as it is (its packed
// tensors would sit in an output without their config group): ignored, it is BF16 in both
// outputs; outside the targets, the decode output's dense form.
func TestPackedSourceSchemes(t *testing.T) {
	src := kimiSource(t)
	const ignored, other = "model.layers.1.mlp.experts.0.up_proj", "model.layers.1.mlp.experts.1.up_proj"
	for _, tc := range []struct {
		dense   convert.DenseForm
		decodeO convert.Scheme
	}{{convert.DenseBF16, convert.SchemeBF16}, {convert.DenseFP8, convert.SchemeFP8Block}} {
		p := plan(t, src, convert.Options{Ignore: `experts\.0\.up_proj$`, Targets: `experts\.[02-9]\.`, DecodeDense: tc.dense})
		seen := 0
		for _, m := range p.Modules {
			switch m.Name {
			case ignored:
				seen++
				if m.Scheme(convert.KindPrefill) != convert.SchemeBF16 || m.Scheme(convert.KindDecode) != convert.SchemeBF16 {
					t.Errorf("ignored %s: schemes %v, want bf16 in both", m.Name, m.Schemes)
				}
			case other:
				seen++
				if m.Scheme(convert.KindPrefill) != convert.SchemeFP8Block || m.Scheme(convert.KindDecode) != tc.decodeO {
					t.Errorf("non-target %s with decode dense %s: schemes %v", m.Name, tc.dense, m.Schemes)
				}
			}
			if m.Packed != nil && (m.Scheme(convert.KindPrefill) == convert.SchemeCopy || m.Scheme(convert.KindDecode) == convert.SchemeCopy) {
				t.Errorf("%s: packed module copied: %v", m.Name, m.Schemes)
			}
		}
		if seen != 2 {
			t.Fatalf("modules %s and %s not planned", ignored, other)
		}
		out := filepath.Join(t.TempDir(), "out")
		if _, err := runPlan(p, out, convert.RunOptions{Workers: 2}); err != nil {
			t.Fatal(err)
		}
		dec := readTensors(t, filepath.Join(out, "decode"))
		if x := dec[ignored+".weight"]; x == nil || x.DType != safetensors.BF16 || len(x.Shape) != 2 || x.Shape[1] != 256 {
			t.Fatalf("decode %s.weight: %+v", ignored, x)
		}
		for _, kind := range []string{"decode", "prefill"} {
			if v := verifyDir(t, src, filepath.Join(out, kind)); !v.OK() {
				t.Fatalf("decode dense %s: verify %s: %v", tc.dense, kind, v.Problems)
			}
		}
	}
}
