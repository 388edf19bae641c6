package engines_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/safetensors"
)

// fixtureGroups reads testdata/formats/NAME.json: the quantization_config "format" and
// "config_groups" of one decode format, hand-written from compressed-tensors' documented layout
// (docs/FP4.md, "Config groups, as the library validates them").
func fixtureGroups(t *testing.T, name string) map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "formats", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// fp4Base is the decode checkpoint of DeepSeek-V3's dimensions (hidden 7168, experts 2048 wide,
// 256 of them) with INT4 g32 experts, planned once.
var fp4Base = struct {
	once sync.Once
	in   engines.Input
}{}

func deepseekDecode(t *testing.T) engines.Input {
	fp4Base.once.Do(func() {
		fp4Base.in = layout(t, "deepseek-v3.json", true, convert.Options{GroupSize: 32}, nil).decode
	})
	return fp4Base.in
}

// asFormat rewrites an INT4 decode checkpoint's routed experts into the layout of the fixture's
// format, tensor by tensor as docs/FP4.md's table has them, with the fixture's config groups.
func asFormat(t *testing.T, in engines.Input, name string) engines.Input {
	t.Helper()
	fx := fixtureGroups(t, name)
	out := engines.Input{}
	qc := qconfig(t, &in)
	qc["format"] = fx["format"]
	qc["config_groups"] = fx["config_groups"]
	out.Config = in.Config
	for _, x := range in.Tensors {
		if !strings.Contains(x.Name, ".experts.") || !strings.HasSuffix(x.Name, ".weight_packed") {
			if strings.Contains(x.Name, ".experts.") && (strings.HasSuffix(x.Name, ".weight_scale") || strings.HasSuffix(x.Name, ".weight_shape")) {
				continue
			}
			out.Tensors = append(out.Tensors, x)
			continue
		}
		m := strings.TrimSuffix(x.Name, ".weight_packed")
		n, k := x.Shape[0], x.Shape[1]*8
		add := func(suffix string, dt safetensors.DType, shape ...int64) {
			out.Tensors = append(out.Tensors, engines.Tensor{Name: m + "." + suffix, DType: dt, Shape: shape})
		}
		switch name {
		case "nvfp4", "nvfp4-w4a4":
			add("weight_packed", safetensors.U8, n, k/2)
			add("weight_scale", safetensors.F8E4M3, n, k/16)
			add("weight_global_scale", safetensors.F32, 1)
			if name == "nvfp4-w4a4" {
				add("input_global_scale", safetensors.F32, 1)
			}
		case "mxfp4":
			add("weight_packed", safetensors.U8, n, k/2)
			add("weight_scale", safetensors.U8, n, k/32)
		case "w4afp8":
			add("weight_packed", safetensors.I32, n, k/8)
			add("weight_scale", safetensors.BF16, n, k/128)
			add("weight_shape", safetensors.I64, 2)
		default:
			t.Fatalf("no layout for %s", name)
		}
	}
	return out
}

// TestFormatFixturesLoad: each format, in its documented layout, loads in both engines at TP8
// with no GPU given, and the result names the experts' format.
func TestFormatFixturesLoad(t *testing.T) {
	base := deepseekDecode(t)
	for name, want := range map[string]engines.Format{
		"nvfp4": engines.FormatNVFP4, "nvfp4-w4a4": engines.FormatNVFP4A4,
		"mxfp4": engines.FormatMXFP4, "w4afp8": engines.FormatW4AFP8,
	} {
		in := asFormat(t, base, name)
		for _, e := range engines.Engines {
			r := checkOK(t, name+" "+string(e), e, in, 8)
			if r.ExpertFormat != want {
				t.Errorf("%s %s: experts read as %q, want %q", name, e, r.ExpertFormat, want)
			}
		}
	}
	if r := engines.Check(engines.VLLM, base, engines.Options{TP: 8}); r.ExpertFormat != engines.FormatInt4 {
		t.Errorf("INT4: experts read as %q", r.ExpertFormat)
	}
}

// TestFormatGPURules: with the server's GPU given, each engine refuses the formats it has no
// kernel for there, and only those, as read in the engines' sources (docs/SERVING.md): NVFP4
// weight-only runs through FP4 Marlin from SM80 in both; NVFP4 W4A4 needs Blackwell in SGLang
// (vLLM falls back to Marlin); MXFP4 runs through Marlin everywhere; W4AFP8 runs on SM90 only.
func TestFormatGPURules(t *testing.T) {
	base := deepseekDecode(t)
	refused := map[string]map[engines.Engine][]int{ // SMs where the engine refuses the format
		"nvfp4":      {},
		"nvfp4-w4a4": {engines.SGLang: {80, 90}},
		"mxfp4":      {},
		"w4afp8":     {engines.SGLang: {80, 100}, engines.VLLM: {80, 100}},
	}
	for name, byEngine := range refused {
		in := asFormat(t, base, name)
		for _, e := range engines.Engines {
			for _, sm := range []int{80, 90, 100} {
				r := engines.Check(e, in, engines.Options{TP: 8, SM: sm})
				want := false
				for _, x := range byEngine[e] {
					want = want || x == sm
				}
				if got := hasRule(r, "gpu", "mlp.experts"); got != want {
					t.Errorf("%s %s SM%d: refused %v, want %v (%v)", name, e, sm, got, want, r.Problems)
				}
			}
		}
	}
	for _, sm := range []int{80, 90, 100} {
		if r := engines.Check(engines.SGLang, base, engines.Options{TP: 8, SM: sm}); hasRule(r, "gpu", "") {
			t.Errorf("INT4 SM%d: %v", sm, r.Problems)
		}
	}
	if r := engines.Check(engines.VLLM, asFormat(t, base, "w4afp8"), engines.Options{TP: 8, SM: 120}); !hasRule(r, "gpu", "") {
		t.Errorf("SM120 is outside the table: %v", r.Problems)
	}
}

// TestFormatTensorRules: each FP4 tensor the schemes register, broken once.
func TestFormatTensorRules(t *testing.T) {
	base := deepseekDecode(t)
	const expert = "model.layers.3.mlp.experts.7.up_proj"
	for _, tc := range []struct {
		format, tensor string
		edit           func(*engines.Tensor) bool // false: drop the tensor
	}{
		{"nvfp4", "weight_scale", func(x *engines.Tensor) bool { x.DType = safetensors.BF16; return true }},
		{"nvfp4", "weight_global_scale", func(*engines.Tensor) bool { return false }},
		{"nvfp4", "weight_packed", func(x *engines.Tensor) bool { x.DType = safetensors.I32; return true }},
		{"nvfp4-w4a4", "input_global_scale", func(*engines.Tensor) bool { return false }},
		{"mxfp4", "weight_scale", func(x *engines.Tensor) bool { x.Shape = []int64{x.Shape[0], x.Shape[1] * 2}; return true }},
		{"mxfp4", "weight_scale", func(x *engines.Tensor) bool { x.DType = safetensors.F8E4M3; return true }},
	} {
		in := asFormat(t, base, tc.format)
		var ts []engines.Tensor
		for _, x := range in.Tensors {
			if x.Name == expert+"."+tc.tensor && !tc.edit(&x) {
				continue
			}
			ts = append(ts, x)
		}
		in.Tensors = ts
		for _, e := range engines.Engines {
			if r := engines.Check(e, in, engines.Options{TP: 8}); !hasRule(r, "scheme-tensors", "mlp.experts") {
				t.Errorf("%s %s %s broken: %v", tc.format, e, tc.tensor, r.Problems)
			}
		}
	}
}

// TestFormatMoEShapeRules: the kernels' width rules per format. DeepSeek-V3's experts (2048
// wide) are 128 per rank at TP16: FP4 Marlin (multiples of 64) takes it, vLLM's CUTLASS W4A8
// reorder (256) does not; at TP64 (32 per rank) FP4 Marlin refuses too.
func TestFormatMoEShapeRules(t *testing.T) {
	base := deepseekDecode(t)
	for _, tc := range []struct {
		format string
		e      engines.Engine
		tp     int
		want   bool
	}{
		{"w4afp8", engines.VLLM, 16, true},
		{"w4afp8", engines.VLLM, 8, false},
		{"w4afp8", engines.SGLang, 16, false}, // SGLang's W4A8 kernel's shape rules were not read
		{"nvfp4", engines.SGLang, 16, false},
		{"nvfp4", engines.SGLang, 64, true},
		{"nvfp4", engines.VLLM, 64, true},
		{"mxfp4", engines.SGLang, 64, true},
		{"mxfp4", engines.VLLM, 64, true},
	} {
		r := engines.Check(tc.e, asFormat(t, base, tc.format), engines.Options{TP: tc.tp})
		if got := hasRule(r, "moe-shape", "mlp.experts"); got != tc.want {
			t.Errorf("%s %s TP%d: moe-shape %v, want %v (%v)", tc.format, tc.e, tc.tp, got, tc.want, r.Problems)
		}
	}
}

// TestW4AFP8SchemeRules: the W4A8 MoE schemes' assertions, each broken once.
func TestW4AFP8SchemeRules(t *testing.T) {
	base := asFormat(t, deepseekDecode(t), "w4afp8")
	edit := func(f func(qc, w map[string]any)) engines.Input {
		in := base
		qc := qconfig(t, &in)
		g := qc["config_groups"].(map[string]any)["group_0"].(map[string]any)
		f(qc, g["weights"].(map[string]any))
		return in
	}
	in := edit(func(_, w map[string]any) { w["group_size"] = json.Number("64") })
	for _, e := range engines.Engines {
		if r := engines.Check(e, in, engines.Options{TP: 8}); !hasRule(r, "moe-group-size", "") {
			t.Errorf("%s group 64: %v", e, r.Problems)
		}
	}
	in = edit(func(_, w map[string]any) { w["actorder"] = "group" })
	if r := engines.Check(engines.VLLM, in, engines.Options{TP: 8}); !hasRule(r, "moe-actorder", "") {
		t.Errorf("actorder group: %v", r.Problems)
	}
	in = edit(func(qc, _ map[string]any) { qc["format"] = "int-quantized" })
	if r := engines.Check(engines.SGLang, in, engines.Options{TP: 8}); !hasRule(r, "format", "") {
		t.Errorf("int-quantized: %v", r.Problems)
	}
	// asymmetric weights are not W4AFP8 to the engines' scheme tests at all
	in = edit(func(_, w map[string]any) { w["symmetric"] = false })
	if r := engines.Check(engines.VLLM, in, engines.Options{TP: 8}); r.ExpertFormat != engines.FormatOther {
		t.Errorf("asymmetric W4AFP8 read as %q", r.ExpertFormat)
	}
}

// TestNVFP4GateUpGlobalScale: gate and up of one expert with different global scales are refused
// (the engines keep the gate's for both); equal ones, and unread ones, are not.
func TestNVFP4GateUpGlobalScale(t *testing.T) {
	in := asFormat(t, deepseekDecode(t), "nvfp4")
	in.GlobalScales = map[string]float32{}
	for _, x := range in.Tensors {
		if strings.HasSuffix(x.Name, ".weight_global_scale") {
			in.GlobalScales[x.Name] = 1000
		}
	}
	for _, e := range engines.Engines {
		if r := engines.Check(e, in, engines.Options{TP: 8}); hasRule(r, "moe-global-scale", "") {
			t.Errorf("%s equal scales: %v", e, r.Problems)
		}
	}
	in.GlobalScales["model.layers.3.mlp.experts.9.up_proj.weight_global_scale"] = 999
	for _, e := range engines.Engines {
		r := engines.Check(e, in, engines.Options{TP: 8})
		if !hasRule(r, "moe-global-scale", "mlp.experts") {
			t.Errorf("%s gate != up: %v", e, r.Problems)
		}
	}
}

// TestFormatNearMisses: config groups that look like a format but are not one to the engines'
// scheme tests are not checked as that format.
func TestFormatNearMisses(t *testing.T) {
	base := deepseekDecode(t)
	for name, edit := range map[string]func(g map[string]any){
		"nvfp4 weights, fp8 inputs": func(g map[string]any) {
			g["input_activations"] = map[string]any{"num_bits": json.Number("8"), "type": "float", "strategy": "token", "dynamic": true, "symmetric": true}
		},
		"nvfp4 group 32": func(g map[string]any) { g["weights"].(map[string]any)["group_size"] = json.Number("32") },
		"w4afp8 static inputs": func(g map[string]any) {
			g["input_activations"].(map[string]any)["dynamic"] = false
		},
	} {
		fx := "nvfp4"
		if strings.HasPrefix(name, "w4afp8") {
			fx = "w4afp8"
		}
		in := asFormat(t, base, fx)
		qc := qconfig(t, &in)
		edit(qc["config_groups"].(map[string]any)["group_0"].(map[string]any))
		if r := engines.Check(engines.VLLM, in, engines.Options{TP: 8}); r.ExpertFormat != engines.FormatOther || !hasRule(r, "scheme", "mlp.experts") {
			t.Errorf("%s: read as %q (%v)", name, r.ExpertFormat, r.Problems)
		}
	}
}

// TestParseGPU: GPU names and capabilities, and what the table does not cover.
func TestParseGPU(t *testing.T) {
	for s, want := range map[string]int{"h200": 90, "H100": 90, "b200": 100, "GB200": 100, "a100": 80, "sm90": 90, "100": 100} {
		g, err := engines.ParseGPU(s)
		if err != nil || g.SM != want {
			t.Errorf("%s: %v %v, want SM%d", s, g, err, want)
		}
	}
	for _, s := range []string{"v100", "sm120", "", "rtx"} {
		if _, err := engines.ParseGPU(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestSupportTableCovered: every format the table names has a row for each engine and generation.
func TestSupportTableCovered(t *testing.T) {
	for _, f := range engines.SupportedFormats {
		if n := len(engines.SupportTable(f)); n != len(engines.Engines)*len(engines.Generations) {
			t.Errorf("%s: %d cells, want %d", f, n, len(engines.Engines)*len(engines.Generations))
		}
	}
}

// TestLoadGlobalScales: Load reads the NVFP4 weight_global_scale values from the files (and only
// those), so that verify --engine can compare gate and up.
func TestLoadGlobalScales(t *testing.T) {
	dir := t.TempDir()
	specs := []safetensors.TensorSpec{
		{Name: "model.layers.0.mlp.experts.0.gate_proj.weight_global_scale", DType: safetensors.F32, Shape: []int64{1}},
		{Name: "model.layers.0.mlp.experts.0.up_proj.weight_global_scale", DType: safetensors.F32, Shape: []int64{1}},
		{Name: "model.layers.0.mlp.experts.0.up_proj.weight_scale", DType: safetensors.F32, Shape: []int64{1}},
	}
	l, err := safetensors.ComputeLayout(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := safetensors.Create(filepath.Join(dir, "model.safetensors"), l)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range [][]byte{{0, 0, 0x7a, 0x44}, {0, 0, 0x7a, 0x44 | 0x80}, {0, 0, 0x80, 0x3f}} { // 1000, -1000, 1
		if err := w.WriteTensor(specs[i].Name, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": ["DeepseekV3ForCausalLM"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := engines.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float32{specs[0].Name: 1000, specs[1].Name: -1000}
	if len(in.GlobalScales) != len(want) {
		t.Fatalf("global scales %v, want %v", in.GlobalScales, want)
	}
	for k, v := range want {
		if in.GlobalScales[k] != v {
			t.Errorf("%s: %v, want %v", k, in.GlobalScales[k], v)
		}
	}
}

// TestNVFP4FusedLinearGlobalScale: dense Linears made NVFP4 (a --targets reaching them): vLLM
// fuses gate and up of a shared expert into gate_up_proj with one global scale, so different
// ones are refused; equal ones are not.
func TestNVFP4FusedLinearGlobalScale(t *testing.T) {
	in := asFormat(t, deepseekDecode(t), "nvfp4")
	const se = "model.layers.3.mlp.shared_experts."
	var ts []engines.Tensor
	for _, x := range in.Tensors {
		if strings.HasPrefix(x.Name, se) && (strings.HasSuffix(x.Name, "_proj.weight")) {
			m := strings.TrimSuffix(x.Name, ".weight")
			n, k := x.Shape[0], x.Shape[1]
			ts = append(ts, engines.Tensor{Name: m + ".weight_packed", DType: safetensors.U8, Shape: []int64{n, k / 2}},
				engines.Tensor{Name: m + ".weight_scale", DType: safetensors.F8E4M3, Shape: []int64{n, k / 16}},
				engines.Tensor{Name: m + ".weight_global_scale", DType: safetensors.F32, Shape: []int64{1}})
			continue
		}
		ts = append(ts, x)
	}
	in.Tensors = ts
	qc := qconfig(t, &in)
	var ignore []any // the dense MLP entries go (the other layers' dense MLPs then fail, not checked here)
	for _, e := range qc["ignore"].([]any) {
		if !strings.Contains(e.(string), "gate_proj") && !strings.Contains(e.(string), "down_proj") {
			ignore = append(ignore, e)
		}
	}
	qc["ignore"] = ignore
	in.GlobalScales = map[string]float32{se + "gate_proj.weight_global_scale": 500, se + "up_proj.weight_global_scale": 500, se + "down_proj.weight_global_scale": 300}
	if r := engines.Check(engines.VLLM, in, engines.Options{TP: 8}); hasRule(r, "fused-global-scale", "") || hasRule(r, "scheme-tensors", "layers.3.mlp.shared_experts") {
		t.Errorf("equal scales: %v", r.Problems)
	}
	in.GlobalScales[se+"up_proj.weight_global_scale"] = 400
	if r := engines.Check(engines.VLLM, in, engines.Options{TP: 8}); !hasRule(r, "fused-global-scale", "shared_experts.gate_up_proj") {
		t.Errorf("gate 500, up 400: %v", r.Problems)
	}
}
