package engines

import (
	"strconv"

	"pdq/quantize/rules"
	"pdq/safetensors"
)

// fp8Fused are the fused names whose parts an FP8 "ignored_layers" check splits (vLLM's
// is_layer_skipped with the model's packed_modules_mapping, and its gate_up_proj special case;
// SGLang's the same).
func fp8Fused(e Engine, f Family) map[string][]string {
	m := PackedMapping(e, f, false)
	m["gate_up_proj"] = []string{"gate_proj", "up_proj"}
	return m
}

// layerSkipped is is_layer_skipped of the FP8 method: exact names in ignored_layers; a fused
// module is skipped when its parts are (disagreeing parts: ErrMixedShards).
func layerSkipped(name string, ignored []string, fused map[string][]string) (bool, error) {
	parent, leaf := splitLast(name)
	parts, ok := fused[leaf]
	if !ok {
		return contains(ignored, name), nil
	}
	var first bool
	for i, p := range parts {
		got := contains(ignored, parent+"."+p)
		if i == 0 {
			first = got
		} else if got != first {
			return false, ErrMixedShards
		}
	}
	return first, nil
}

// checkFP8 checks a DeepSeek-style FP8 block checkpoint (the prefill output, or an FP8 source).
func (c *checker) checkFP8(qc map[string]any, mods []Module) {
	src := srcSGLDeepseek
	if c.e == VLLM {
		src = srcVLLMDeepseek
	}
	block := []int64{128, 128}
	if bs, ok := qc["weight_block_size"].([]any); ok && len(bs) == 2 {
		for i, v := range bs {
			n, _ := rules.IntOf(v)
			block[i] = n
		}
	}
	if block[0] <= 0 || block[1] <= 0 {
		c.problem("", "fp8-config", src, "weight_block_size %v is not two positive sizes", block)
		return
	}
	ignored := stringList(qc["ignored_layers"])
	fused := fp8Fused(c.e, c.fam)
	for _, m := range mods {
		switch m.Kind {
		case KindUnquantized:
			c.checkUnquantized(m)
			continue
		case KindEmbedding:
			continue
		case KindMoE:
			if inter, ok := rules.ConfigInt(c.cfg, "moe_intermediate_size"); ok {
				tp := int64(c.moeTP())
				if inter%tp != 0 || (inter/tp)%block[0] != 0 {
					c.problem(m.Name, "fp8-moe-shape", src, "moe_intermediate_size %d / TP %d is not a multiple of the FP8 block %d", inter, tp, block[0])
				}
			}
		}
		skip, err := layerSkipped(m.Name, ignored, fused)
		if m.Draft {
			skip, err = contains(ignored, m.Name), nil // draft names are not the checkpoint's
			for _, p := range m.Parts {
				skip = skip || contains(ignored, p)
			}
		}
		if err != nil {
			c.problem(m.Name, "fp8-fused-ignore", src, "ignored_layers lists some of %v but not all: the engine raises ValueError", m.Parts)
			continue
		}
		for _, p := range m.Parts {
			w, ok := c.byName[p+".weight"]
			if !ok {
				c.problem(m.Name, "fp8-tensors", src, "%s has no weight", p)
				continue
			}
			if skip || w.DType != safetensors.F8E4M3 {
				if !skip {
					c.problem(m.Name, "fp8-not-ignored", src, "%s is %s but not in ignored_layers: the engine builds an FP8 layer and reads it as FP8 codes", p, w.DType)
				} else if ok, why := c.plain(p); !ok {
					c.problem(m.Name, "fp8-ignored-not-plain", src, "%s is in ignored_layers but %s", p, why)
				}
				continue
			}
			s, ok := c.byName[p+".weight_scale_inv"]
			want := []int64{ceilDiv(w.Shape[0], block[0]), ceilDiv(w.Shape[1], block[1])}
			if !ok || len(s.Shape) != 2 || s.Shape[0] != want[0] || s.Shape[1] != want[1] {
				c.problem(m.Name, "fp8-tensors", src, "%s: FP8 weight without weight_scale_inv %v", p, want)
			}
		}
	}
}

// checkFusion applies SGLang's shared-expert fusion. DeepseekV3ForCausalLM and
// GlmMoeDsaForCausalLM (deepseek_v2.py determine_num_fused_shared_experts, which glm4_moe.py's
// GlmMoeDsaForCausalLM calls) fuse one shared expert beside 256 routed experts.
// Glm4MoeForCausalLM (glm4_moe.py determine_num_fused_shared_experts) fuses whatever the routed
// expert count: num_fused_shared_experts is n_shared_experts whenever the config has shared
// experts, and its load_weights asserts it is 1, so a GLM-4.x config with more shared experts
// fails to load unless fusion is off. Fusion runs on CUDA SM80+ (or ROCm gfx942+) without EP,
// DeepEP or a W4AFP8 config; pdq plans for CUDA and takes it on, since an EP launch only drops a
// flag it did not need. A fused shared expert is loaded as routed expert number n_routed_experts
// with the routed experts' scheme: one stored in another form than the routed ones then does not
// load, and --disable-shared-experts-fusion keeps it a separate MLP.
func (c *checker) checkFusion(qc map[string]any, mods []Module) {
	if c.e != SGLang {
		return // vLLM fuses shared experts only on ROCm with AITER (deepseek_v2.py)
	}
	shared, _ := rules.ConfigInt(c.cfg, "n_shared_experts")
	routed, _ := rules.ConfigInt(c.cfg, "n_routed_experts")
	glm4 := c.arch == "Glm4MoeForCausalLM"
	fuses := glm4 && shared >= 1 ||
		shared == 1 && routed == 256 && (c.arch == "DeepseekV3ForCausalLM" || c.arch == "GlmMoeDsaForCausalLM")
	if !fuses {
		return
	}
	if glm4 && shared > 1 {
		f := Finding{Engine: c.e, Rule: "shared-expert-fusion", Source: srcSGLGLM4.String(),
			Flag: "--disable-shared-experts-fusion",
			Problem: "SGLang fuses the " + strconv.FormatInt(shared, 10) + " shared experts of this GLM-4.x config " +
				"into the routed experts, but its loader takes exactly one: launch with --disable-shared-experts-fusion"}
		c.res.Flags = append(c.res.Flags, f)
		if !contains(c.o.Flags, f.Flag) {
			c.res.Problems = append(c.res.Problems, f)
		}
		return
	}
	src := srcSGLDeepseek
	if c.fam == FamilyGLM4 || c.arch == "GlmMoeDsaForCausalLM" {
		src = srcSGLGLM4
	}
	for _, m := range mods {
		if m.Kind != KindMoE || len(m.Parts) == 0 {
			continue
		}
		layer, _ := splitLast(m.Parts[0]) // model.layers.N.mlp.experts.E
		layer, _ = splitLast(layer)
		layer, _ = splitLast(layer) // model.layers.N.mlp
		sharedGate := layer + ".shared_experts.gate_proj"
		if form(c, sharedGate) == "" || form(c, sharedGate) == form(c, m.Parts[0]) {
			continue
		}
		f := Finding{Engine: c.e, Module: m.Name, Rule: "shared-expert-fusion", Source: src.String(),
			Flag: "--disable-shared-experts-fusion",
			Problem: "SGLang fuses the shared expert into the routed experts as expert " + strconv.FormatInt(routed, 10) +
				" with their scheme, but the shared expert is stored " + form(c, sharedGate) + " and the routed ones " +
				form(c, m.Parts[0]) + ": launch with --disable-shared-experts-fusion"}
		c.res.Flags = append(c.res.Flags, f)
		if !contains(c.o.Flags, f.Flag) {
			c.res.Problems = append(c.res.Problems, f)
		}
		return
	}
}

// form names how a checkpoint module is stored: "INT4", "FP8", "BF16", ... ("" when absent).
func form(c *checker, m string) string {
	if _, ok := c.byName[m+".weight_packed"]; ok {
		return "INT4"
	}
	if w, ok := c.byName[m+".weight"]; ok {
		if w.DType == safetensors.F8E4M3 {
			return "FP8"
		}
		return string(w.DType)
	}
	return ""
}
