package convert_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/safetensors"
	"pdq/synth"
)

// smallSource is a two-layer GLM-4-style checkpoint whose experts have 192 intermediate
// features: down_proj has K = 192, not a multiple of 128 (shared, read-only).
func smallSource(t testing.TB) string {
	return shared(t, "small-192", func(dir string) error {
		m := synth.Tiny(synth.StyleGLM4)
		m.Layers, m.Experts, m.MoEIntermediate, m.Vocab = 2, 4, 192, 256
		return generateInto(dir, synth.Options{Model: m, Seed: 7, MaxShardBytes: 256 << 10})
	})
}

var smallOptions = convert.Options{GroupSize: 32, MaxShardSize: 256 << 10}

// copyDir copies the regular files of src into a fresh directory, for tests that modify a source.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range readTree(t, src) {
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestOutputDirRefusals: a non-empty output directory needs Resume or Force; Force starts over;
// Resume refuses a directory started with other options.
func TestOutputDirRefusals(t *testing.T) {
	src := smallSource(t)
	ref := filepath.Join(t.TempDir(), "ref")
	convertTo(t, src, ref, smallOptions, convert.RunOptions{Workers: 2})
	want := outputFiles(t, ref)

	junk := t.TempDir()
	if err := os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runPlan(plan(t, src, smallOptions), junk, convert.RunOptions{}); !errors.Is(err, convert.ErrNotEmpty) {
		t.Errorf("unrelated file in the output directory: got %v, want ErrNotEmpty", err)
	}
	if _, err := runPlan(plan(t, src, smallOptions), ref, convert.RunOptions{}); !errors.Is(err, convert.ErrNotEmpty) {
		t.Errorf("finished output directory: got %v, want ErrNotEmpty", err)
	}

	// A directory converted with other options: Resume refuses it, Force starts over.
	out := filepath.Join(t.TempDir(), "out")
	other := smallOptions
	other.GroupSize = 64
	convertTo(t, src, out, other, convert.RunOptions{Workers: 2})
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Existing: convert.Resume}); err == nil {
		t.Errorf("resume of a directory converted with other options succeeded")
	}
	if err := os.WriteFile(filepath.Join(out, "decode", "stale.safetensors"), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	convertTo(t, src, out, smallOptions, convert.RunOptions{Workers: 2, Existing: convert.Restart})
	sameFiles(t, "forced rerun vs fresh run", want, outputFiles(t, out))
}

// TestSourceChanged: a source shard that changes between planning and reading, or while the
// conversion runs, fails the run, which leaves nothing that looks finished.
func TestSourceChanged(t *testing.T) {
	shard := "model-00001-of-" // the first shard, whatever the count
	firstShard := func(t *testing.T, dir string) string {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), shard) {
				return filepath.Join(dir, e.Name())
			}
		}
		t.Fatal("no first shard")
		return ""
	}
	touch := func(path string) error {
		later := time.Now().Add(time.Hour)
		return os.Chtimes(path, later, later)
	}
	appendTo := func(path string) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.Write([]byte("trailing"))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	for _, tc := range []struct {
		name   string
		change func(string) error
		during bool // from the progress callback, after the shard was opened and read from
	}{
		{"touched-before-run", touch, false},
		{"appended-before-run", appendTo, false},
		{"touched-during-run", touch, true},
		{"appended-during-run", appendTo, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := copyDir(t, smallSource(t))
			p := plan(t, src, smallOptions)
			path := firstShard(t, src)
			var ro convert.RunOptions
			var changeErr error
			if tc.during {
				var once sync.Once
				ro.Progress = func(int64, int64, string) { once.Do(func() { changeErr = tc.change(path) }) }
			} else if err := tc.change(path); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := runPlan(p, out, ro)
			if changeErr != nil {
				t.Fatal(changeErr)
			}
			switch {
			case err == nil:
				t.Fatalf("conversion of a changed source succeeded")
			case tc.during && !errors.Is(err, convert.ErrSourceChanged):
				t.Errorf("got %v, want ErrSourceChanged", err)
			case !errors.Is(err, convert.ErrSourceChanged) && !errors.Is(err, safetensors.ErrShardChanged):
				t.Errorf("got %v, want ErrSourceChanged or safetensors.ErrShardChanged", err)
			}
			if err != nil && !strings.Contains(err.Error(), filepath.Base(path)) {
				t.Errorf("error does not name the shard %s: %v", filepath.Base(path), err)
			}
			checkUnfinished(t, out)
			checkNoPartial(t, out)
		})
	}
}

// TestSourceTruncatedDuringRun: the last shard is cut short after the run has started: reading
// it fails, every reader stops, the run returns the error naming the shard, and nothing looks
// finished; with one reader and with several.
func TestSourceTruncatedDuringRun(t *testing.T) {
	for _, readers := range []int{1, 3} {
		t.Run(fmt.Sprintf("readers=%d", readers), func(t *testing.T) {
			src := copyDir(t, deepseekSource(t))
			p := plan(t, src, smallOptions)
			last := p.Source.Shards[len(p.Source.Shards)-1]
			var once sync.Once
			var cutErr error
			ro := convert.RunOptions{Workers: 2, Readers: readers, MaxMemory: 1 << 20, Progress: func(int64, int64, string) {
				once.Do(func() { cutErr = os.Truncate(last.Path, last.Size/2) })
			}}
			out := filepath.Join(t.TempDir(), "out")
			_, err := runPlan(p, out, ro)
			if cutErr != nil {
				t.Fatal(cutErr)
			}
			if err == nil {
				t.Fatal("conversion of a truncated source succeeded")
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, convert.ErrSourceChanged) {
				t.Errorf("got %v, want a short read or ErrSourceChanged", err)
			}
			if !strings.Contains(err.Error(), last.Name) {
				t.Errorf("error does not name the shard %s: %v", last.Name, err)
			}
			checkUnfinished(t, out)
			checkNoPartial(t, out)
		})
	}
}

// TestUnsupportedGroup: group size 128 does not divide down_proj's 192 in-features: planning
// refuses with ErrUnsupported naming the tensor, and OnUnsupported "skip" keeps those modules
// dense (listed in the report and in the decode config's ignore list) and converts the rest.
func TestUnsupportedGroup(t *testing.T) {
	src := smallSource(t)
	o := smallOptions
	o.GroupSize = 128
	_, err := tryPlan(t, src, o)
	if !errors.Is(err, convert.ErrUnsupported) {
		t.Fatalf("group 128 with K = 192: got %v, want ErrUnsupported", err)
	}
	if !strings.Contains(err.Error(), "down_proj.weight") {
		t.Errorf("error does not name the tensor: %v", err)
	}
	o.OnUnsupported = "skip"
	out := filepath.Join(t.TempDir(), "out")
	rep := convertTo(t, src, out, o, convert.RunOptions{Workers: 2})
	srcT := readTensors(t, src)
	// One scheme per expert: the down_proj that cannot take g128 keeps its gate and up dense too.
	var downs []string
	for name := range srcT {
		if reTargetWeight.MatchString(name) {
			downs = append(downs, strings.TrimSuffix(name, ".weight"))
		}
	}
	if len(downs) == 0 || len(rep.Skipped) != len(downs) {
		t.Errorf("skipped %d modules %q, want all %d expert projections", len(rep.Skipped), rep.Skipped, len(downs))
	}
	for _, d := range downs {
		found := false
		for _, s := range rep.Skipped {
			found = found || strings.HasPrefix(s, d+":")
		}
		if !found {
			t.Errorf("%s not in the report's skipped list %q", d, rep.Skipped)
		}
	}
	if got := readReport(t, out).Skipped; len(got) != len(rep.Skipped) {
		t.Errorf("report.json lists %d skipped modules, Run returned %d", len(got), len(rep.Skipped))
	}
	ex := expect{group: 128, int4: func(name string) bool { return false }, none: true}
	checkDecodeTensors(t, ex, srcT, readTensors(t, filepath.Join(out, "decode")), rep)
	checkDecodeConfig(t, ex, src, srcT, filepath.Join(out, "decode"))
}

// raw is a tensor of a hand-made checkpoint.
type raw struct {
	name  string
	dtype safetensors.DType
	shape []int64
	data  []byte
}

// writeCheckpoint writes a one-file checkpoint and its config.json into a fresh directory.
func writeCheckpoint(t *testing.T, ts []raw, cfg map[string]any) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	specs := make([]safetensors.TensorSpec, len(ts))
	for i, x := range ts {
		specs[i] = safetensors.TensorSpec{Name: x.name, DType: x.dtype, Shape: x.shape}
	}
	l, err := safetensors.ComputeLayout(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := safetensors.Create(filepath.Join(dir, "model.safetensors"), l)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if err := w.WriteTensor(x.name, x.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// weights returns n normal values with standard deviation 0.02.
func weights(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(0.02 * r.NormFloat64())
	}
	return v
}

func bf16Tensor(name string, seed uint64, shape ...int64) raw {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	b := make([]byte, 2*n)
	for i, v := range weights(seed, int(n)) {
		binary.LittleEndian.PutUint16(b[2*i:], safetensors.Float32ToBF16(v))
	}
	return raw{name, safetensors.BF16, shape, b}
}

// withBF16 sets element i of the BF16 tensor name among ts to the bit pattern bits.
func withBF16(ts []raw, name string, i int, bits uint16) []raw {
	for _, x := range ts {
		if x.name == name {
			binary.LittleEndian.PutUint16(x.data[2*i:], bits)
		}
	}
	return ts
}

// fp8Tensor returns an FP8 weight [n, k] and, unless noScale, its weight_scale_inv.
func fp8Tensor(name string, seed uint64, n, k int64, noScale bool) []raw {
	b := make([]byte, n*k)
	for i, v := range weights(seed, int(n*k)) {
		b[i] = safetensors.Float32ToF8E4M3(v * 448 / 0.1)
	}
	out := []raw{{name, safetensors.F8E4M3, []int64{n, k}, b}}
	if !noScale {
		sr, sc := (n+127)/128, (k+127)/128
		s := make([]byte, 4*sr*sc)
		for i := range sr * sc {
			binary.LittleEndian.PutUint32(s[4*i:], math.Float32bits(0.1/448))
		}
		out = append(out, raw{name + "_scale_inv", safetensors.F32, []int64{sr, sc}, s})
	}
	return out
}

var fp8Config = map[string]any{
	"model_type": "deepseek_v3",
	"quantization_config": map[string]any{
		"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": []int{128, 128},
	},
}

// TestMissingScale: an FP8 weight without its weight_scale_inv is refused at planning time with
// ErrMissingScale naming the tensor.
func TestMissingScale(t *testing.T) {
	var ts []raw
	ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.up_proj.weight", 1, 128, 256, false)...)
	ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.down_proj.weight", 2, 256, 128, true)...)
	ts = append(ts, fp8Tensor("model.layers.1.self_attn.o_proj.weight", 3, 256, 256, false)...)
	src := writeCheckpoint(t, ts, fp8Config)
	_, err := tryPlan(t, src, smallOptions)
	if !errors.Is(err, convert.ErrMissingScale) {
		t.Fatalf("got %v, want ErrMissingScale", err)
	}
	if !strings.Contains(err.Error(), "model.layers.1.mlp.experts.0.down_proj.weight") {
		t.Errorf("error does not name the tensor: %v", err)
	}
}

// TestNonFinite: a NaN or infinity in a weight that a conversion decodes fails the run with an
// error naming the tensor and leaves nothing that looks finished.
func TestNonFinite(t *testing.T) {
	const (
		expert = "model.layers.1.mlp.experts.0.gate_proj.weight"
		attn   = "model.layers.1.self_attn.q_proj.weight"
		embed  = "model.embed_tokens.weight"
	)
	dense := func(bad string, bits uint16) []raw {
		ts := []raw{
			bf16Tensor(embed, 1, 64, 128),
			bf16Tensor("model.layers.1.input_layernorm.weight", 2, 128),
			bf16Tensor(attn, 3, 128, 128),
			bf16Tensor("model.layers.1.mlp.gate.weight", 4, 4, 128),
			bf16Tensor(expert, 5, 64, 128),
			bf16Tensor("model.layers.1.mlp.experts.0.up_proj.weight", 6, 64, 128),
			bf16Tensor("model.layers.1.mlp.experts.0.down_proj.weight", 7, 128, 64),
			bf16Tensor("lm_head.weight", 8, 64, 128),
		}
		return withBF16(ts, bad, 1000, bits)
	}
	fp8 := func(bad string, code byte) []raw {
		var ts []raw
		ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 64, 128))
		ts = append(ts, fp8Tensor(attn, 3, 128, 128, false)...)
		ts = append(ts, fp8Tensor(expert, 5, 64, 128, false)...)
		ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.up_proj.weight", 6, 64, 128, false)...)
		ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.down_proj.weight", 7, 128, 64, false)...)
		for _, x := range ts {
			if x.name == bad {
				x.data[1000] = code
			}
		}
		return ts
	}
	for _, tc := range []struct {
		name   string
		ts     []raw
		cfg    map[string]any
		tensor string
	}{
		{"bf16-nan-expert", dense(expert, 0x7fc0), map[string]any{"model_type": "glm4_moe"}, expert},
		{"bf16-inf-expert", dense(expert, 0xff80), map[string]any{"model_type": "glm4_moe"}, expert},
		{"bf16-nan-attention", dense(attn, 0x7fc0), map[string]any{"model_type": "glm4_moe"}, attn},
		{"fp8-nan-expert", fp8(expert, 0x7f), fp8Config, expert},
		{"fp8-nan-attention", fp8(attn, 0xff), fp8Config, attn},
		// Copied as they are, checked from their bits: the index counts from the tensor's start.
		{"bf16-inf-embedding", dense(embed, 0x7f80), map[string]any{"model_type": "glm4_moe"}, embed + `": element 1000 is +Inf`},
		{"fp8-nan-embedding", withBF16(fp8("", 0), embed, 5000, 0xffc0), fp8Config, embed + `": element 5000 is NaN`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := writeCheckpoint(t, tc.ts, tc.cfg)
			out := filepath.Join(t.TempDir(), "out")
			_, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2})
			if err == nil {
				t.Fatal("conversion of a non-finite weight succeeded")
			}
			t.Log(err)
			if !errors.Is(err, quantize.ErrNonFinite) {
				t.Errorf("got %v, want quantize.ErrNonFinite", err)
			}
			if !strings.Contains(err.Error(), tc.tensor) {
				t.Errorf("error does not name %s: %v", tc.tensor, err)
			}
			checkUnfinished(t, out)
			checkNoPartial(t, out)
		})
	}
}

// TestNonFiniteLaterSlab: a NaN in the second slab of a large tensor is reported at its index
// in the tensor, for a tensor decoded (attention to BF16) and for one copied (the embedding).
func TestNonFiniteLaterSlab(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two 8 MiB tensors")
	}
	const rows, cols = 2100, 2048 // a slab holds 2048 rows of 2048
	const bad = 2050*cols + 3
	for _, name := range []string{"model.layers.1.self_attn.q_proj.weight", "model.embed_tokens.weight"} {
		t.Run(name, func(t *testing.T) {
			ts := []raw{bf16Tensor("model.embed_tokens.weight", 1, rows, cols), bf16Tensor("model.layers.1.self_attn.q_proj.weight", 2, rows, cols),
				bf16Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 3, 64, 128)}
			src := writeCheckpoint(t, withBF16(ts, name, bad, 0x7fc0), map[string]any{"model_type": "glm4_moe"})
			o := smallOptions
			o.Only = convert.KindDecode
			_, err := runPlan(plan(t, src, o), filepath.Join(t.TempDir(), "out"), convert.RunOptions{Workers: 2})
			if !errors.Is(err, quantize.ErrNonFinite) || !strings.Contains(err.Error(), fmt.Sprintf("%s\": element %d is NaN", name, bad)) {
				t.Fatalf("got %v, want ErrNonFinite at element %d of %s", err, bad, name)
			}
		})
	}
}

// TestReviewFP8ScaleShapeRefused: pdq reads FP8 scales per output channel ([N, 1] or [N]) or in
// 128x128 blocks. Any other scale shape (a per-tensor scalar, a wrong row count) is refused at
// planning with ErrUnsupported naming the scale tensor, instead of a panic or an out-of-range
// read in the middle of the run.
func TestFP8ScaleShapeRefused(t *testing.T) {
	const module = "model.layers.1.mlp.experts.0.gate_proj"
	for _, shape := range [][]int64{{}, {1}, {1, 1}, {2, 1}} {
		ts := ctFP8Tensor(module, 3, 256, 256)
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		ts[1] = raw{ts[1].name, safetensors.F32, shape, make([]byte, 4*n)}
		ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 256))
		src := writeCheckpoint(t, ts, map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
			"quant_method": "compressed-tensors", "format": "float-quantized"}})
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("scale %v: panic: %v", shape, r)
				}
			}()
			_, err := tryPlan(t, src, convert.Options{})
			if !errors.Is(err, convert.ErrUnsupported) || !strings.Contains(err.Error(), module+".weight_scale") {
				t.Errorf("scale %v: got %v, want ErrUnsupported naming the scale", shape, err)
			}
			// A prefill-only run of an FP8 source copies the files and reads no scale.
			if _, err := tryPlan(t, src, convert.Options{Only: "prefill"}); err != nil {
				t.Errorf("scale %v, only prefill: %v", shape, err)
			}
		}()
	}
}

// TestReviewSignedScalesNeedMSE: signed scales exist only in the mse search; asking for them
// with rtn is refused when planning (pdq plan and convert exit 2 before writing anything), not
// by the quantizer at the first expert of the run.
func TestSignedScalesNeedMSE(t *testing.T) {
	src := writeCheckpoint(t, []raw{bf16Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 1, 64, 128)}, map[string]any{"model_type": "glm4_moe"})
	if _, err := tryPlan(t, src, convert.Options{Method: "rtn", SignedScales: true}); !errors.Is(err, convert.ErrBadOptions) {
		t.Errorf("rtn with signed scales: got %v, want ErrBadOptions", err)
	}
	if _, err := tryPlan(t, src, convert.Options{Method: "mse", SignedScales: true}); err != nil {
		t.Errorf("mse with signed scales: %v", err)
	}
}

// TestReviewZeroInFeatures: a target with no in features ([N, 0], a valid safetensors tensor)
// cannot be INT4: the plan refuses it naming the tensor (no panic with per-channel groups, no
// late failure in the middle of the run), and --on-unsupported skip keeps it dense.
func TestZeroInFeatures(t *testing.T) {
	const gate = "model.layers.1.mlp.experts.0.gate_proj.weight"
	src := writeCheckpoint(t, []raw{
		bf16Tensor(gate, 1, 64, 0),
		bf16Tensor("model.layers.1.self_attn.q_proj.weight", 2, 64, 128),
	}, map[string]any{"model_type": "glm4_moe"})
	for _, g := range []int{32, convert.PerChannel} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("group %d: plan panicked: %v", g, r)
				}
			}()
			_, err := tryPlan(t, src, convert.Options{GroupSize: g})
			if !errors.Is(err, convert.ErrUnsupported) {
				t.Errorf("group %d: got %v, want ErrUnsupported", g, err)
			}
			p, err := tryPlan(t, src, convert.Options{GroupSize: g, OnUnsupported: "skip"})
			if err != nil {
				t.Fatalf("group %d, skip: %v", g, err)
			}
			if _, err := runPlan(p, filepath.Join(t.TempDir(), "out"), convert.RunOptions{Workers: 2}); err != nil {
				t.Errorf("group %d, skip: run: %v", g, err)
			}
		}()
	}
}

// TestFP8ScaleNotPositive: an FP8 weight_scale_inv of 0, a negative or a NaN is refused naming
// the tensor and the block, and nothing is left under a final name.
func TestFP8ScaleNotPositive(t *testing.T) {
	for _, bad := range []float32{0, -0.5, float32(math.NaN()), float32(math.Inf(1))} {
		var ts []raw
		ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.up_proj.weight", 1, 256, 256, false)...)
		s := ts[1].data
		binary.LittleEndian.PutUint32(s[4*3:], math.Float32bits(bad)) // block [1, 1]
		ts = append(ts, fp8Tensor("model.layers.1.self_attn.o_proj.weight", 3, 256, 256, false)...)
		src := writeCheckpoint(t, ts, fp8Config)
		out := filepath.Join(t.TempDir(), "out")
		_, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2})
		if !errors.Is(err, quantize.ErrBadScale) || !strings.Contains(err.Error(), "up_proj.weight_scale_inv") || !strings.Contains(err.Error(), "block [1, 1]") {
			t.Errorf("scale %v: %v, want ErrBadScale naming the tensor and block [1, 1]", bad, err)
		}
		if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
			t.Errorf("scale %v: report.json written", bad)
		}
	}
}
