package serving

import (
	"reflect"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/rules"
)

// TestEngineFlags: the full-size GLM-5 and DeepSeek-V3 plans (BF16 shared experts beside INT4
// routed ones, 256 experts) need --disable-shared-experts-fusion on SGLang's decode server and
// nothing on its prefill server or on vLLM; Kimi K2 (384 experts) needs nothing; no engine
// refuses either output.
func TestEngineFlags(t *testing.T) {
	for _, tc := range []struct {
		config string
		decode []string
	}{{"glm-5.json", []string{"--disable-shared-experts-fusion"}}, {"deepseek-v3.json", []string{"--disable-shared-experts-fusion"}}, {"kimi-k2-instruct.json", nil}} {
		ck, cfg, _ := headerOnlyLayout(t, tc.config)
		p := planGroup(t, ck, cfg, 32)
		pre, dec, problems := EngineFlags(p, SGLang)
		if len(pre) != 0 || !reflect.DeepEqual(dec, tc.decode) || len(problems) != 0 {
			t.Errorf("%s SGLang: prefill %v decode %v (want %v), problems:\n%s", tc.config, pre, dec, tc.decode, strings.Join(problems, "\n"))
		}
		pre, dec, problems = EngineFlags(p, VLLM)
		if len(pre)+len(dec) != 0 || len(problems) != 0 {
			t.Errorf("%s vLLM: prefill %v decode %v, problems:\n%s", tc.config, pre, dec, strings.Join(problems, "\n"))
		}
	}
}

// TestLaunchEngineFlags: the flags the rules require reach the server they are for.
func TestLaunchEngineFlags(t *testing.T) {
	for _, e := range []Engine{SGLang, VLLM} {
		d := Deployment{Engine: e, Parallel: Parallel{TP: 8, EP: 1}, KVDType: KVBF16, PrefillDir: "p", DecodeDir: "d",
			PrefillFraction: 0.9, DecodeFraction: 0.9, DecodeFlags: []string{"--disable-shared-experts-fusion"}}
		cmds, err := d.Commands()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			has := strings.Contains(strings.Join(c.Args, " "), "--disable-shared-experts-fusion")
			if has != (c.Name == "decode") {
				t.Errorf("%s %s: flag present %v", e, c.Name, has)
			}
			if c.Name == "proxy" && (!strings.Contains(strings.Join(c.Args, " "), "--host 0.0.0.0") || c.Note == "") {
				t.Errorf("vLLM proxy listens on localhost only or says nothing of its source checkout: %v", c)
			}
		}
	}
}

// TestEngineFlagsOnGPU: with the GPU known, a decode output whose experts' format the engine does
// not load there is refused, naming the GPU rule; without it, or on a GPU that loads it, not.
// The plan's decode config is made W4AFP8 (INT4 g128 experts declaring dynamic FP8 inputs), which
// both engines load on SM90 only.
func TestEngineFlagsOnGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a full-size header-only checkpoint")
	}
	ck, cfg, _ := headerOnlyLayout(t, "kimi-k2-instruct.json")
	p, err := convert.NewPlan(ck, cfg, convert.Options{GroupSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	out := p.Output(convert.KindDecode)
	out.Config = rules.CloneConfig(out.Config)
	for _, g := range out.Config["quantization_config"].(map[string]any)["config_groups"].(map[string]any) {
		g := g.(map[string]any)
		if w := g["weights"].(map[string]any); w["type"] == "int" {
			g["input_activations"] = map[string]any{"num_bits": 8, "type": "float", "symmetric": true, "strategy": "token", "dynamic": true}
		}
	}
	for _, e := range []Engine{SGLang, VLLM} {
		for sm, refused := range map[int]bool{0: false, 90: false, 100: true, 80: true} {
			_, _, problems := EngineFlagsOn(p, e, sm)
			got := false
			for _, pr := range problems {
				got = got || strings.Contains(pr, "rule gpu")
			}
			if got != refused {
				t.Errorf("%s SM%d: refused %v, want %v: %q", e, sm, got, refused, problems)
			}
		}
	}
}
