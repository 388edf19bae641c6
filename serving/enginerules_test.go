package serving

import (
	"reflect"
	"strings"
	"testing"
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
