package convert_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/safetensors"
)

// TestGoldenFP4 pins the bytes and reports of the FP4 decode formats, both methods, from a BF16
// and an FP8-block source and from the band sources (slabs cut into bands with a short last one).
func TestGoldenFP4(t *testing.T) {
	if testing.Short() {
		t.Skip("eight conversions")
	}
	glm, ds, bands := glm4Source(t), deepseekSource(t), bandSources(t)
	nv, mx := convert.DecodeNVFP4, convert.DecodeMXFP4
	rtn, mse := quantize.MethodRTN, quantize.MethodMSE
	for _, tc := range []struct {
		name          string
		src           string
		o             convert.Options
		files, report string
	}{
		{"glm4-nvfp4-rtn", glm, convert.Options{DecodeFormat: nv, Method: rtn}, "d7d14ca81794181e", "bef0b1cfa78e13ad"},
		{"glm4-nvfp4-mse", glm, convert.Options{DecodeFormat: nv, Method: mse}, "6efac929ba5c20f5", "49ea280e34994e46"},
		{"glm4-mxfp4-rtn", glm, convert.Options{DecodeFormat: mx, Method: rtn}, "d1d11925455bf342", "98cdba20caaa8f66"},
		{"glm4-mxfp4-mse", glm, convert.Options{DecodeFormat: mx, Method: mse}, "2db8cd0877f26943", "5d7637046ddd74a8"},
		{"deepseek-nvfp4-mse-densefp8", ds, convert.Options{DecodeFormat: nv, Method: mse, DecodeDense: convert.DenseFP8}, "31576dbbc16ac865", "ce669ad72ad66601"},
		{"deepseek-mxfp4-rtn", ds, convert.Options{DecodeFormat: mx, Method: rtn, Only: convert.KindDecode}, "e2be59bacd13d578", "c312b41db1aaac82"},
		{"bands-fp8block-nvfp4-mse", bands["fp8block"], convert.Options{DecodeFormat: nv, Method: mse}, "6bd504eed3c237b0", "e4573770a4d1e677"},
		{"bands-f16-mxfp4-mse", bands["f16"], convert.Options{DecodeFormat: mx, Method: mse}, "fcc9839dc4f561e4", "0901fa6f6d1bd1ee"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			tc.o.MaxShardSize = 1 << 20
			convertTo(t, tc.src, out, tc.o, convert.RunOptions{Workers: 2})
			files := outputFiles(t, out)
			report := reportWithoutPaths(t, files["report.json"])
			delete(files, "report.json")
			if got := hashFiles(files); got != tc.files {
				t.Errorf("checkpoint files hash %s, want %s", got, tc.files)
			}
			if got := hashFiles(map[string][]byte{"report.json": report}); got != tc.report {
				t.Errorf("report.json hash %s, want %s", got, tc.report)
			}
		})
	}
}

// TestFP4WritesLibraryResult: every routed expert of an NVFP4 or MXFP4 decode output holds what
// quantize.QuantizeFP4 gives for its whole source tensor, NVFP4 under the global scale of the
// largest |value| of the expert's gate and up together: gate and up carry identical global
// scales, down one of its own. The report's rows are measured from those bytes.
func TestFP4WritesLibraryResult(t *testing.T) {
	src := glm4Source(t)
	srcT := readTensors(t, src)
	for _, f := range []convert.DecodeFormat{convert.DecodeNVFP4, convert.DecodeMXFP4} {
		t.Run(string(f), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			rep := convertTo(t, src, out, convert.Options{DecodeFormat: f, Method: quantize.MethodRTN, Only: convert.KindDecode}, convert.RunOptions{Workers: 2})
			got := readTensors(t, filepath.Join(out, "decode"))
			rows := map[string]float64{}
			for _, r := range rep.Tensors {
				rows[r.Tensor] = float64(r.SQNR)
			}
			format := quantize.PackedNVFP4
			if f == convert.DecodeMXFP4 {
				format = quantize.PackedMXFP4
			}
			experts, ownDiffers := 0, 0
			for name, w := range srcT {
				module, ok := strings.CutSuffix(name, ".weight")
				if !ok || !strings.Contains(module, ".experts.") {
					continue
				}
				experts++
				vals := w.floats(t)
				rowsN, cols := int(w.Shape[0]), int(w.Shape[1])
				opt := quantize.FP4Options{Format: format, Method: quantize.MethodRTN, Workers: 1}
				if format == quantize.PackedNVFP4 {
					amax := absMax(vals)
					if sib := siblingName(module); sib != "" {
						amax = max(amax, absMax(srcT[sib+".weight"].floats(t)))
						if kernels.NVFP4GlobalScale(absMax(vals)) != kernels.NVFP4GlobalScale(amax) {
							ownDiffers++
						}
					}
					opt.Global = kernels.NVFP4GlobalScale(amax)
					g := got[module+".weight_global_scale"]
					if g == nil || g.DType != safetensors.F32 || len(g.Raw) != 4 {
						t.Fatalf("%s: global scale %+v, want F32 [1]", module, g)
					}
					if v := math.Float32frombits(binary.LittleEndian.Uint32(g.Raw)); v != opt.Global {
						t.Fatalf("%s: global scale %v, want %v (shared by gate and up)", module, v, opt.Global)
					}
				}
				want, err := quantize.QuantizeFP4(context.Background(), vals, rowsN, cols, opt)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[module+".weight_packed"].Raw, want.Packed) || !bytes.Equal(got[module+".weight_scale"].Raw, want.Scales) {
					t.Fatalf("%s: written codes or scales differ from QuantizeFP4 of the whole tensor", module)
				}
				var m quantize.Metrics
				if err := m.AddFP4(vals, want, 0); err != nil {
					t.Fatal(err)
				}
				if r, ok := rows[module+".weight_packed"]; !ok || math.Abs(r-m.SQNR()) > 1e-9 {
					t.Fatalf("%s: report SQNR %v, the written bytes give %v", module, r, m.SQNR())
				}
			}
			if experts == 0 {
				t.Fatal("no routed expert in the source")
			}
			if format == quantize.PackedNVFP4 && ownDiffers == 0 {
				t.Fatal("no gate or up whose own global scale differs from the shared one: the test shows nothing")
			}
		})
	}
}

// siblingName is the gate or up projection sharing a w13 GEMM with module, "" for others.
func siblingName(module string) string {
	for a, b := range map[string]string{".gate_proj": ".up_proj", ".up_proj": ".gate_proj"} {
		if p, ok := strings.CutSuffix(module, a); ok {
			return p + b
		}
	}
	return ""
}

func absMax(v []float32) float32 {
	var a float32
	for _, x := range v {
		a = max(a, float32(math.Abs(float64(x))))
	}
	return a
}

// TestFP4Deterministic: NVFP4 output (whose global scales need a pass over gate and up first)
// is byte-identical for one and three workers, for several parts run apart and merged, and after
// a resumed run.
func TestFP4Deterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs conversions in child processes")
	}
	for _, tc := range []struct {
		name string
		src  string
	}{{"glm4-bf16", glm4Source(t)}, {"deepseek-fp8", deepseekSource(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			o := convert.Options{DecodeFormat: convert.DecodeNVFP4, MaxShardSize: 1 << 20}
			one := filepath.Join(t.TempDir(), "one")
			convertTo(t, tc.src, one, o, convert.RunOptions{Workers: 1})
			want := outputFiles(t, one)
			three := filepath.Join(t.TempDir(), "three")
			convertTo(t, tc.src, three, o, convert.RunOptions{Workers: 3})
			sameFiles(t, "1 worker vs 3", want, outputFiles(t, three))
			// Killed after a few slabs, then resumed: the tensors finished before are kept, the rest
			// find their global scales again.
			opts, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, slabs := range []int64{5, 40} {
				out := filepath.Join(t.TempDir(), "resumed")
				if !runChild(t, tc.src, out, slabs, 0, envOptions+"="+string(opts)) {
					t.Fatalf("the child finished before slab %d", slabs)
				}
				if _, err := runPlan(plan(t, tc.src, o), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err != nil {
					t.Fatalf("resume after %d slabs: %v", slabs, err)
				}
				sameFiles(t, fmt.Sprintf("single run vs killed after %d slabs and resumed", slabs), want, outputFiles(t, out))
			}
			for _, n := range []int{2, 3} {
				out := filepath.Join(t.TempDir(), "split")
				runParts(t, tc.src, o, "", out, n)
				if _, err := convert.Merge(context.Background(), plan(t, tc.src, o), out, convert.RunOptions{}); err != nil {
					t.Fatalf("merge of %d parts: %v", n, err)
				}
				sameFiles(t, fmt.Sprintf("single run vs %d parts merged", n), want, outputFiles(t, out))
			}
		})
	}
}

// TestFP4Verify: pdq verify accepts NVFP4 and MXFP4 outputs (the options read back from
// config.json, the values recomputed from the written bytes and compared with report.json), and
// finds a damaged global scale.
func TestFP4Verify(t *testing.T) {
	src := deepseekSource(t)
	for _, f := range []convert.DecodeFormat{convert.DecodeNVFP4, convert.DecodeMXFP4} {
		t.Run(string(f), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			convertTo(t, src, out, convert.Options{DecodeFormat: f, MaxShardSize: 1 << 20}, convert.RunOptions{Workers: 2})
			v := verifyDir(t, src, filepath.Join(out, "decode"))
			if !v.OK() || !v.ReportChecked {
				t.Fatalf("verify: problems %v, report checked %v", v.Problems, v.ReportChecked)
			}
			if f != convert.DecodeNVFP4 {
				return
			}
			name := "model.layers.3.mlp.experts.1.up_proj.weight_global_scale"
			overwriteTensor(t, filepath.Join(out, "decode"), name, []byte{0, 0, 0xc0, 0x7f}) // NaN
			v = verifyDir(t, src, filepath.Join(out, "decode"))
			if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), name) {
				t.Fatalf("a NaN global scale not found: %v", v.Problems)
			}
		})
	}
}

// verifyDir runs convert.Verify of one output dir against the source src.
func verifyDir(t *testing.T, src, dir string) *convert.VerifyResult {
	t.Helper()
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := convert.Verify(context.Background(), ck, dir, 2)
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	return v
}

// overwriteTensor replaces the bytes of tensor name in the checkpoint in dir.
func overwriteTensor(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	x := ck.Tensor(name)
	if x == nil {
		t.Fatalf("no tensor %q", name)
	}
	path, off := x.Shard.Path, x.Offset()
	ck.Close()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestFP4Options: the FP4 formats fix their groups (a contradicting group size is refused, the
// format's own accepted), and refuse the INT4-only options.
func TestFP4Options(t *testing.T) {
	src := glm4Source(t)
	for _, tc := range []struct {
		name string
		o    convert.Options
		ok   bool
	}{
		{"nvfp4-default", convert.Options{DecodeFormat: convert.DecodeNVFP4}, true},
		{"nvfp4-g16", convert.Options{DecodeFormat: convert.DecodeNVFP4, GroupSize: 16}, true},
		{"nvfp4-g32", convert.Options{DecodeFormat: convert.DecodeNVFP4, GroupSize: 32}, false},
		{"mxfp4-g32", convert.Options{DecodeFormat: convert.DecodeMXFP4, GroupSize: 32}, true},
		{"mxfp4-channel", convert.Options{DecodeFormat: convert.DecodeMXFP4, GroupSize: convert.PerChannel}, false},
		{"nvfp4-signed", convert.Options{DecodeFormat: convert.DecodeNVFP4, SignedScales: true}, false},
		{"int4-g16", convert.Options{GroupSize: 16}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tryPlan(t, src, tc.o)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && !errors.Is(err, convert.ErrBadOptions):
				t.Fatalf("got %v, want ErrBadOptions", err)
			case tc.ok && p.Options.GroupSize != map[convert.DecodeFormat]int{convert.DecodeNVFP4: 16, convert.DecodeMXFP4: 32}[tc.o.DecodeFormat]:
				t.Fatalf("group size %d", p.Options.GroupSize)
			}
		})
	}
}

// TestNVFP4NonFinite: a NaN in an expert's up projection is reported, at its row and element in
// the tensor, by the pass that finds the global scale the gate shares, before anything of either
// is written as finished.
func TestNVFP4NonFinite(t *testing.T) {
	const gate, up = "model.layers.1.mlp.experts.0.gate_proj.weight", "model.layers.1.mlp.experts.0.up_proj.weight"
	const rows, cols = 300, 1024 // read in chunks of 256 rows: the NaN is in the second
	const bad = 280*cols + 7
	ts := []raw{bf16Tensor("model.embed_tokens.weight", 1, 16, 1024), bf16Tensor(gate, 2, rows, cols), bf16Tensor(up, 3, rows, cols)}
	src := writeCheckpoint(t, withBF16(ts, up, bad, 0x7fc0), map[string]any{"model_type": "glm4_moe"})
	for _, f := range []convert.DecodeFormat{convert.DecodeNVFP4, convert.DecodeMXFP4} {
		_, err := runPlan(plan(t, src, convert.Options{DecodeFormat: f, Only: convert.KindDecode}), filepath.Join(t.TempDir(), "out"), convert.RunOptions{Workers: 2})
		want := fmt.Sprintf("element %d (row %d, column %d) is NaN", bad, bad/cols, bad%cols)
		if !errors.Is(err, quantize.ErrNonFinite) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), up) {
			t.Errorf("%s: got %v, want ErrNonFinite naming %s at %q", f, err, up, want)
		}
	}
}
