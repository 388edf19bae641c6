package convert_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/rules"
)

// wrapTextConfig copies the checkpoint src to a new directory whose config.json is a multimodal
// wrapper of src's, as Kimi K2.5's: the language model's keys, quantization_config included,
// under text_config, the top level holding the wrapper's architecture and a vision_config.
// edit, when set, changes the text_config first.
func wrapTextConfig(t *testing.T, src string, edit func(tc map[string]any)) string {
	t.Helper()
	dir := copyTree(t, src, filepath.Join(t.TempDir(), "wrapped"))
	tc, err := rules.LoadConfig(src)
	if err != nil || tc == nil {
		t.Fatalf("source config: %v", err)
	}
	if edit != nil {
		edit(tc)
	}
	b, err := json.Marshal(map[string]any{
		"architectures": []string{"KimiK25ForConditionalGeneration"}, "model_type": "kimi_k25",
		"text_config": tc, "vision_config": map[string]any{"hidden_size": 1152, "num_hidden_layers": 27},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTextConfigSource: a source whose quantization_config and model sizes sit under
// text_config is read like a top-level one. A Kimi-K2.6-style INT4 source converts to the
// same tensors and report rows wrapped or not, a nested quantization_config that declares
// another format is refused as a top-level one is, each output's quantization_config replaces the source's under text_config (none
// left stale, none added at the top), verify accepts both outputs, and the sizes under
// text_config drive the same config warnings. An FP8-block source's prefill copy keeps its
// nested quantization_config and gets no top-level one.
func TestTextConfigSource(t *testing.T) {
	src := kimiSource(t)
	wrapped := wrapTextConfig(t, src, nil)
	plainOut, wrapOut := filepath.Join(t.TempDir(), "plain"), filepath.Join(t.TempDir(), "wrapped")
	plainRep := convertTo(t, src, plainOut, convert.Options{}, convert.RunOptions{Workers: 2})
	wrapRep := convertTo(t, wrapped, wrapOut, convert.Options{}, convert.RunOptions{Workers: 2})
	if !reflect.DeepEqual(plainRep.Tensors, wrapRep.Tensors) || !reflect.DeepEqual(plainRep.Summary, wrapRep.Summary) {
		t.Fatal("the wrapped source's report rows differ from the plain source's")
	}
	passed := 0
	for _, r := range wrapRep.Tensors {
		if r.Scheme == string(convert.SchemePassed) {
			passed++
		}
	}
	if passed == 0 {
		t.Fatal("no expert passed through: the nested quantization_config was not read")
	}
	for _, kind := range []string{"decode", "prefill"} {
		a, b := readTree(t, filepath.Join(plainOut, kind)), readTree(t, filepath.Join(wrapOut, kind))
		pc, wc := readJSON(t, filepath.Join(plainOut, kind, "config.json")), readJSON(t, filepath.Join(wrapOut, kind, "config.json"))
		delete(a, "config.json")
		delete(b, "config.json")
		sameFiles(t, kind, a, b)
		if _, top := wc["quantization_config"]; top {
			t.Errorf("%s: config.json has a top-level quantization_config beside text_config's", kind)
		}
		tc, _ := wc["text_config"].(map[string]any)
		if tc == nil || !reflect.DeepEqual(tc["quantization_config"], pc["quantization_config"]) {
			t.Errorf("%s: text_config.quantization_config is %v, want the plain output's %v", kind, tc["quantization_config"], pc["quantization_config"])
		}
		if v := verifyDir(t, wrapped, filepath.Join(wrapOut, kind)); !v.OK() || !v.ReportChecked {
			t.Errorf("verify %s: %v (report checked: %v)", kind, v.Problems, v.ReportChecked)
		}
	}

	// A config with quantization_config at both levels gets the output's at both.
	both := wrapTextConfig(t, src, nil)
	cfg := readJSON(t, filepath.Join(both, "config.json"))
	cfg["quantization_config"] = cfg["text_config"].(map[string]any)["quantization_config"]
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(both, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range plan(t, both, convert.Options{}).Outputs {
		top, nested := out.Config["quantization_config"], rules.TextConfig(out.Config)["quantization_config"]
		want := map[convert.OutputKind]string{convert.KindPrefill: "fp8", convert.KindDecode: "compressed-tensors"}[out.Kind]
		if m, _ := top.(map[string]any); m == nil || m["quant_method"] != want || !reflect.DeepEqual(top, nested) {
			t.Errorf("both levels, %s: top %v, text_config %v", out.Kind, top, nested)
		}
	}

	// The declared format is read: NVFP4 declared over INT4 tensors is refused, nested or not.
	nvfp4 := func(c map[string]any) {
		c["quantization_config"].(map[string]any)["format"] = "nvfp4-pack-quantized"
		for _, g := range c["quantization_config"].(map[string]any)["config_groups"].(map[string]any) {
			g.(map[string]any)["format"] = "nvfp4-pack-quantized"
		}
	}
	plainNV := copyTree(t, src, filepath.Join(t.TempDir(), "plain-nvfp4"))
	cfg = readJSON(t, filepath.Join(plainNV, "config.json"))
	nvfp4(cfg)
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(plainNV, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, perr := tryPlan(t, plainNV, convert.Options{})
	_, werr := tryPlan(t, wrapTextConfig(t, src, nvfp4), convert.Options{})
	if perr == nil || werr == nil || !strings.Contains(perr.Error(), "config.json declares") || !strings.Contains(werr.Error(), "config.json declares") {
		t.Fatalf("NVFP4 declared over INT4 tensors: plain %v, wrapped %v", perr, werr)
	}

	// Sizes: a text_config that claims too few experts warns as a top-level one does.
	few := func(c map[string]any) { c["n_routed_experts"] = 1 }
	wrappedFew := wrapTextConfig(t, src, few)
	plainFew := copyTree(t, src, filepath.Join(t.TempDir(), "plain-few"))
	cfg = readJSON(t, filepath.Join(plainFew, "config.json"))
	few(cfg)
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(plainFew, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	pw, ww := plan(t, plainFew, convert.Options{}).Warnings, plan(t, wrappedFew, convert.Options{}).Warnings
	if !slices.ContainsFunc(pw, func(w string) bool { return strings.Contains(w, "n_routed_experts") }) || !reflect.DeepEqual(pw, ww) {
		t.Fatalf("warnings: plain %q, wrapped %q", pw, ww)
	}

	// An FP8-block source: its prefill output is a copy whose config.json is the source's.
	fp8 := wrapTextConfig(t, deepseekSource(t), func(c map[string]any) {
		c["quantization_config"] = map[string]any{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": []int{128, 128}}
	})
	out := filepath.Join(t.TempDir(), "fp8")
	convertTo(t, fp8, out, convert.Options{Only: convert.KindPrefill}, convert.RunOptions{Workers: 2})
	if got, want := readJSON(t, filepath.Join(out, "prefill", "config.json")), readJSON(t, filepath.Join(fp8, "config.json")); !reflect.DeepEqual(got, want) {
		t.Fatalf("FP8 copy config %v, want the source's %v", got, want)
	}
}
