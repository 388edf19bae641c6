package convert_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/synth"
)

// deepseek256Source is deepseekSource's model with routed experts of intermediate size 256, the
// smallest vLLM's W4A8 MoE kernels take (shared, read-only).
func deepseek256Source(t testing.TB) string {
	return shared(t, "deepseek-fp8-moe256", func(dir string) error {
		m := synth.Tiny(synth.StyleDeepSeek)
		m.MoEIntermediate = 256
		return generateInto(dir, synth.Options{Model: m, FP8: true, Seed: 3, MaxShardBytes: 1 << 20})
	})
}

// TestW4AFP8: the routed experts are INT4 g128 exactly as an INT4 conversion with group size 128
// writes them, the config group declares dynamic per-token FP8 input activations, the report
// measures the weights vLLM's W4A8 kernels compute with (quantize.W4AFP8Dequantize: e4m3 group
// scales, e4m3 products), not the BF16 scales' q·s the INT4 report measures on the same bytes,
// verify (which decodes them the same way) accepts the output, and the bytes are pinned.
func TestW4AFP8(t *testing.T) {
	src := deepseek256Source(t)
	out := filepath.Join(t.TempDir(), "w4afp8")
	o := convert.Options{DecodeFormat: convert.DecodeW4AFP8, MaxShardSize: 1 << 20}
	rep := convertTo(t, src, out, o, convert.RunOptions{Workers: 2})
	int4 := filepath.Join(t.TempDir(), "int4")
	int4Rep := convertTo(t, src, int4, convert.Options{GroupSize: 128, MaxShardSize: 1 << 20, Only: convert.KindDecode}, convert.RunOptions{Workers: 2})
	int4SQNR := map[string]float64{}
	for _, r := range int4Rep.Tensors {
		int4SQNR[r.Tensor] = float64(r.SQNR)
	}
	var engine, bf16 float64
	rows := 0
	for _, r := range rep.Tensors {
		if r.Scheme != string(convert.SchemeW4AFP8) {
			continue
		}
		want, ok := int4SQNR[r.Tensor]
		if !ok || float64(r.SQNR) == want {
			t.Fatalf("%s: W4AFP8 SQNR %v, the INT4 g128 report's %v (found %v): the engine's weights are not q·s", r.Tensor, r.SQNR, want, ok)
		}
		engine, bf16, rows = engine+float64(r.SQNR), bf16+want, rows+1
	}
	if rows == 0 || engine >= bf16 {
		t.Fatalf("%d W4AFP8 rows, mean SQNR %.3f dB against %.3f dB for q·s", rows, engine/float64(max(rows, 1)), bf16/float64(max(rows, 1)))
	}
	t.Logf("%d W4AFP8 rows: mean SQNR %.3f dB on the engine's weights, %.3f dB on q·s", rows, engine/float64(rows), bf16/float64(rows))
	got, want := readTensors(t, filepath.Join(out, "decode")), readTensors(t, filepath.Join(int4, "decode"))
	n := 0
	for name, x := range got {
		if strings.Contains(name, ".experts.") && strings.HasSuffix(name, ".weight_packed") {
			n++
			if w := want[name]; w == nil || !bytes.Equal(w.Raw, x.Raw) || !bytes.Equal(want[strings.TrimSuffix(name, "_packed")+"_scale"].Raw, got[strings.TrimSuffix(name, "_packed")+"_scale"].Raw) {
				t.Fatalf("%s differs from the INT4 g128 conversion", name)
			}
		}
	}
	if n == 0 {
		t.Fatal("no routed expert written")
	}
	qc := readJSON(t, filepath.Join(out, "decode", "config.json"))["quantization_config"].(map[string]any)
	g := qc["config_groups"].(map[string]any)["group_0"].(map[string]any)
	a, _ := g["input_activations"].(map[string]any)
	w, _ := g["weights"].(map[string]any)
	if qc["format"] != "pack-quantized" || g["format"] != "pack-quantized" || a == nil || a["type"] != "float" || a["strategy"] != "token" ||
		a["dynamic"] != true || a["num_bits"] != 8.0 || w["group_size"] != 128.0 || w["type"] != "int" {
		t.Fatalf("config group %v", g)
	}
	if v := verifyDir(t, src, filepath.Join(out, "decode")); !v.OK() || !v.ReportChecked {
		t.Fatalf("verify: %v", v.Problems)
	}
	files := outputFiles(t, out)
	report := reportWithoutPaths(t, files["report.json"])
	delete(files, "report.json")
	if got, want := hashFiles(files), "2565e21215592baa"; got != want {
		t.Errorf("checkpoint files hash %s, want %s", got, want)
	}
	if got, want := hashFiles(map[string][]byte{"report.json": report}), "9111429725571790"; got != want {
		t.Errorf("report.json hash %s, want %s", got, want)
	}
}

// TestW4AFP8Refuses: experts the W4A8 MoE kernels cannot take are refused with ErrW4AFP8Shape
// (an ErrUnsupported), kept dense under skip, and a group size other than 128 is refused.
func TestW4AFP8Refuses(t *testing.T) {
	src := glm4Source(t) // routed experts of intermediate size 128
	_, err := tryPlan(t, src, convert.Options{DecodeFormat: convert.DecodeW4AFP8})
	if !errors.Is(err, convert.ErrW4AFP8Shape) || !errors.Is(err, convert.ErrUnsupported) || !strings.Contains(err.Error(), "divisible by 256") {
		t.Fatalf("got %v, want ErrW4AFP8Shape naming the rule", err)
	}
	p, err := tryPlan(t, src, convert.Options{DecodeFormat: convert.DecodeW4AFP8, OnUnsupported: convert.UnsupportedSkip, NoInt4OK: true})
	if err != nil || len(p.Skipped) == 0 {
		t.Fatalf("skip: %v, %d skipped", err, len(p.Skipped))
	}
	if _, err := tryPlan(t, deepseek256Source(t), convert.Options{DecodeFormat: convert.DecodeW4AFP8, GroupSize: 64}); !errors.Is(err, convert.ErrBadOptions) {
		t.Fatalf("group size 64: %v", err)
	}
	if _, err := tryPlan(t, deepseek256Source(t), convert.Options{DecodeFormat: convert.DecodeW4AFP8, Method: quantize.MethodRTN}); err != nil {
		t.Fatalf("rtn: %v", err)
	}
}
