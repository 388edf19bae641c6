package engines_test

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
	"pdq/safetensors"
)

// oldIgnore is the ignore list pdq wrote before the engines' names were considered: one entry per
// checkpoint module name, layer indices folded into "re:prefix\d+suffix$".
func oldIgnore(in engines.Input) []string {
	layer := regexp.MustCompile(`^(.*?\.layers\.)\d+(\..*)$`)
	seen := map[string]bool{}
	var out []string
	for _, t := range in.Tensors {
		if !strings.HasSuffix(t.Name, ".weight") || len(t.Shape) != 2 || strings.Contains(t.Name, "embed_tokens") {
			continue
		}
		m := strings.TrimSuffix(t.Name, ".weight")
		if sm := layer.FindStringSubmatch(m); sm != nil {
			m = "re:" + regexp.QuoteMeta(sm[1]) + `\d+` + regexp.QuoteMeta(sm[2]) + "$"
		}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// withIgnore is in with the decode config's ignore list replaced.
func withIgnore(t *testing.T, in engines.Input, ignore []string) engines.Input {
	qc := qconfig(t, &in)
	list := make([]any, len(ignore))
	for i, s := range ignore {
		list[i] = s
	}
	qc["ignore"] = list
	return in
}

// TestDefectFusedNames (defect 1): SGLang builds gate_up_proj (dense MLP, shared expert) and
// fused_qkv_a_proj_with_mqa, and registers only the latter in packed_modules_mapping; the old
// per-checkpoint-name ignore list reaches neither gate_up_proj, which then gets the INT4 scheme.
// vLLM splits both fused names back, but builds the MTP layer under "mtp_block", which the old
// layer-anchored entries miss. The new list passes both.
func TestDefectFusedNames(t *testing.T) {
	for _, config := range []string{"glm-5.json", "kimi-k2-instruct.json", "deepseek-v3.json"} {
		pl := layout(t, config, true, convert.Options{}, nil)
		old := withIgnore(t, pl.decode, oldIgnore(pl.decode))
		r := engines.Check(engines.SGLang, old, engines.Options{Flags: []string{"--disable-shared-experts-fusion"}})
		if !hasRule(r, "scheme-tensors", "mlp.gate_up_proj") || !hasRule(r, "scheme-tensors", "shared_experts.gate_up_proj") {
			t.Errorf("%s: old ignore list: SGLang gate_up_proj not found refused: %v", config, r.Problems)
		}
		if strings.Contains(config, "kimi") {
			checkOK(t, config+" new", engines.SGLang, pl.decode, 8)
			continue
		}
		r = engines.Check(engines.VLLM, old, engines.Options{})
		if !hasRule(r, "scheme-tensors", "mtp_block") {
			t.Errorf("%s: old ignore list: vLLM MTP draft not found refused: %v", config, r.Problems)
		}
		for _, e := range engines.Engines {
			checkOK(t, config+" new", e, pl.decode, 8)
		}
	}
}

// TestDefectSharedExpertFusion (defect 2): SGLang fuses DeepSeek-V3's and GLM-5's one shared
// expert into 256 routed experts; beside INT4 routed experts a BF16 shared expert needs
// --disable-shared-experts-fusion. Kimi K2's 384 experts are not fused; vLLM fuses only on ROCm.
func TestDefectSharedExpertFusion(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   bool
	}{{"deepseek-v3.json", true}, {"glm-5.json", true}, {"glm-4.7.official.json", true}, {"kimi-k2-instruct.json", false}} {
		pl := layout(t, tc.config, false, convert.Options{}, nil)
		r := engines.Check(engines.SGLang, pl.decode, engines.Options{})
		got := hasRule(r, "shared-expert-fusion", "")
		if got != tc.want || (len(r.RequiredFlags()) > 0) != tc.want {
			t.Errorf("%s: fusion finding %v (flags %v), want %v", tc.config, got, r.RequiredFlags(), tc.want)
		}
		if r := engines.Check(engines.SGLang, pl.prefill, engines.Options{}); len(r.Flags) != 0 {
			t.Errorf("%s: prefill (one scheme for all experts) needs no flag: %v", tc.config, r.Flags)
		}
		if r := engines.Check(engines.VLLM, pl.decode, engines.Options{}); len(r.Flags) != 0 {
			t.Errorf("%s: vLLM needs no fusion flag: %v", tc.config, r.Flags)
		}
	}
}

// quantizeFP8 turns module m of in into an FP8 block module with the given scale suffix: the
// layout pdq wrote before the always-unquantized rule.
func quantizeFP8(in engines.Input, module, scale string) engines.Input {
	var out []engines.Tensor
	for _, t := range in.Tensors {
		if t.Name == module+".weight" {
			t.DType = safetensors.F8E4M3
			out = append(out, t, engines.Tensor{Name: module + scale, DType: safetensors.F32,
				Shape: []int64{(t.Shape[0] + 127) / 128, (t.Shape[1] + 127) / 128}})
			continue
		}
		out = append(out, t)
	}
	in.Tensors = out
	return in
}

// TestDefectUnquantizedModules (defects 3, 4): the indexer's weights_proj and the MTP eh_proj
// are built unquantized by both engines; FP8 blocks there (the old BF16-source prefill, the old
// --decode-dense fp8) are refused, and pdq's plans now keep them BF16.
func TestDefectUnquantizedModules(t *testing.T) {
	pl := layout(t, "glm-5.json", false, convert.Options{DecodeDense: convert.DenseFP8}, nil)
	for _, m := range pl.plan.Modules {
		if _, ok := engines.AlwaysUnquantized(m.Name); ok && m.Linear {
			if m.Scheme(convert.KindPrefill) != convert.SchemeCopy || m.Scheme(convert.KindDecode) != convert.SchemeCopy {
				t.Errorf("%s planned prefill %s decode %s, want both copied BF16", m.Name, m.Scheme(convert.KindPrefill), m.Scheme(convert.KindDecode))
			}
		}
	}
	for _, mod := range []string{"model.layers.0.self_attn.indexer.weights_proj", "model.layers.4.eh_proj"} {
		for _, e := range engines.Engines {
			old := quantizeFP8(pl.prefill, mod, ".weight_scale_inv")
			if r := engines.Check(e, old, engines.Options{}); !hasRule(r, "always-unquantized", "") {
				t.Errorf("%s prefill with FP8 %s: not refused: %v", e, mod, r.Problems)
			}
			old = quantizeFP8(pl.decode, mod, ".weight_scale")
			if r := engines.Check(e, old, engines.Options{}); !hasRule(r, "always-unquantized", "") {
				t.Errorf("%s decode with FP8 %s: not refused: %v", e, mod, r.Problems)
			}
		}
	}
	checkOK(t, "vllm decode-dense fp8", engines.VLLM, pl.decode, 8)
	checkOK(t, "sglang prefill", engines.SGLang, pl.prefill, 8)
}

// TestDefectFP8SourceConfig (defect 5): an FP8 source converted with a config.json that has no
// quantization_config (--config FILE) gets the FP8 block quantization_config in its prefill copy;
// without it both engines read the FP8 codes as BF16.
func TestDefectFP8SourceConfig(t *testing.T) {
	pl := layout(t, "glm-5.json", true, convert.Options{}, func(c map[string]any) { delete(c, "quantization_config") })
	old := pl.prefill
	old.Config = pl.source.Config
	for _, e := range engines.Engines {
		if r := engines.Check(e, old, engines.Options{}); !hasRule(r, "no-quantization-config", "") {
			t.Errorf("%s: FP8 weights without quantization_config not refused: %v", e, r.Problems)
		}
		checkOK(t, string(e)+" prefill", e, pl.prefill, 8)
	}
	if !pl.plan.Output(convert.KindPrefill).WriteConfig {
		t.Errorf("prefill copy does not write its config")
	}
}

// TestKimiK2ThinkingIgnore: the ignore list Kimi-K2-Thinking publishes (broad patterns over the
// whole attention, shared experts and dense MLPs) loads in both engines.
func TestKimiK2ThinkingIgnore(t *testing.T) {
	pl := layout(t, "kimi-k2-instruct.json", true, convert.Options{GroupSize: 32}, nil)
	in := withIgnore(t, pl.decode, []string{"lm_head", `re:.*self_attn.*`, `re:.*shared_experts.*`, `re:.*mlp\.(gate|up|gate_up|down)_proj.*`})
	for _, e := range engines.Engines {
		checkOK(t, string(e), e, in, 8)
	}
}
