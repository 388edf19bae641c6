package convert

import (
	"fmt"
	"regexp"
	"strings"

	"pdq/quantize/engines"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// Module is one unit of conversion: a Linear weight with its scale companion, or a plain tensor.
type Module struct {
	Name   string              // module name ("model.layers.3.mlp.experts.7.up_proj") or tensor name
	Role   rules.Role          // what it does in the model
	Linear bool                // a Linear weight (quantizable)
	Weight *safetensors.Tensor // the weight, or the plain tensor
	Scale  *safetensors.Tensor // FP8 scale companion (weight_scale_inv or weight_scale), or nil
	Rows   int                 // out features (N)
	Cols   int                 // in features (K)
	// Schemes is what each output does with the module, indexed like the outputs a conversion
	// writes: prefill, then decode (see Scheme).
	Schemes []Scheme
	// Skipped says why a target was kept dense under --on-unsupported skip.
	Skipped string
	// Calib is how calibration statistics quantize an INT4 module (nil without statistics).
	Calib *ModuleCalib
	// Packed is the source of a module that arrives already quantized (Weight is then its packed
	// codes); nil otherwise.
	Packed *packedSource

	bound []Bound // per output: its encoding bound to the module (Plan.bindAll)
}

// neverQuantized are roles whose 2-D weights no output quantizes (FORMATS.md §2).
var neverQuantized = map[rules.Role]bool{rules.RoleEmbedding: true, rules.RoleNorm: true, rules.RoleRouter: true}

// buildModules groups tensors into modules and picks each module's schemes.
func (p *Plan) buildModules(ts []*safetensors.Tensor, targets, ignore *regexp.Regexp) error {
	byName := make(map[string]*safetensors.Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	companion := map[string]bool{}
	for _, t := range ts {
		module, suffix := rules.ModuleOf(t.Name)
		if suffix != "weight" || len(t.Shape) != 2 {
			continue
		}
		role := rules.RoleOf(t.Name)
		if neverQuantized[role] {
			continue
		}
		if s := byName[module+".weight_scale_inv"]; s != nil {
			companion[s.Name] = true
		} else if s := byName[module+".weight_scale"]; s != nil && t.DType == safetensors.F8E4M3 {
			companion[s.Name] = true
		}
		if s := byName[module+".input_scale"]; s != nil && t.DType == safetensors.F8E4M3 {
			companion[s.Name] = true // static activation scale: no output scheme quantizes activations statically
		}
	}
	packed, err := p.findPacked(ts, byName, companion)
	if err != nil {
		return err
	}
	fp8Source := p.Layout.FP8()
	for _, t := range ts {
		if companion[t.Name] {
			continue
		}
		if ps := packed[t.Name]; ps != nil {
			m := newPackedModule(t, ps)
			if err := p.chooseSchemes(m, targets, ignore, false); err != nil {
				return err
			}
			p.packedSchemes(m)
			p.Modules = append(p.Modules, m)
			continue
		}
		module, suffix := rules.ModuleOf(t.Name)
		m := &Module{Name: t.Name, Role: rules.RoleOf(t.Name), Weight: t}
		for _, kind := range outputKinds {
			m.setScheme(kind, SchemeCopy)
		}
		linear := suffix == "weight" && len(t.Shape) == 2 && !neverQuantized[m.Role]
		if linear && (t.DType.IsFloat() || t.DType == safetensors.F8E4M3) {
			m.Name, m.Linear = module, true
			m.Rows, m.Cols = int(t.Shape[0]), int(t.Shape[1])
			if t.DType == safetensors.F8E4M3 {
				m.Scale = byName[module+".weight_scale_inv"]
				if m.Scale == nil {
					m.Scale = byName[module+".weight_scale"]
				}
				if m.Scale == nil {
					return fmt.Errorf("convert: %s: tensor %q: %w (want %s.weight_scale_inv)", t.Shard.Name, t.Name, ErrMissingScale, module)
				}
				if !(fp8Source && p.Options.Only == KindPrefill) && !isChannelScale(m) && !isBlockScale(m) {
					return fmt.Errorf("convert: %s: tensor %q: %w: FP8 scale shape %v (want [%d, 1] per channel or [%d, %d] for %dx%d blocks)",
						m.Scale.Shard.Name, m.Scale.Name, ErrUnsupported, m.Scale.Shape, m.Rows, ceilDiv(int64(m.Rows), FP8BlockSize), ceilDiv(int64(m.Cols), FP8BlockSize), FP8BlockSize, FP8BlockSize)
				}
			}
			if err := p.chooseSchemes(m, targets, ignore, fp8Source); err != nil {
				return err
			}
		}
		p.Modules = append(p.Modules, m)
	}
	p.skipSiblings()
	return nil
}

// skipSiblings keeps whole experts together: the engines need gate, up and down of one expert in
// one scheme, so when one projection had to stay dense its INT4 siblings stay dense too.
func (p *Plan) skipSiblings() {
	skippedParent := map[string]string{}
	for _, m := range p.Modules {
		if m.Skipped != "" {
			skippedParent[parentOf(m.Name)] = m.Name
		}
	}
	if len(skippedParent) == 0 {
		return
	}
	for _, m := range p.Modules {
		cause, ok := skippedParent[parentOf(m.Name)]
		if s := m.Scheme(KindDecode); !ok || s != p.Options.targetScheme() && s != SchemePassed {
			continue
		}
		m.Skipped = "kept with " + cause + " (one scheme per expert)"
		p.Skipped = append(p.Skipped, m.Name+": "+m.Skipped)
		m.setScheme(KindDecode, m.denseFallback())
	}
}

// parentOf is the module's parent ("model.layers.3.mlp.experts.7" for its gate_proj).
func parentOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return name
}

func (p *Plan) chooseSchemes(m *Module, targets, ignore *regexp.Regexp, fp8Source bool) error {
	o := p.Options
	ignored := ignore != nil && ignore.MatchString(m.Name)
	if o.IgnoreSet != nil {
		ignored = o.IgnoreSet[m.Name]
	}
	isTarget := targets.MatchString(m.Name)
	if o.TargetSet != nil {
		isTarget = o.TargetSet[m.Name]
	}
	if _, ok := engines.AlwaysUnquantized(m.Name); ok {
		ignored = true // both engines build it unquantized: a quantized form would not load
	}
	fp8 := m.Weight.DType == safetensors.F8E4M3
	// Prefill: FP8 sources pass through whole; dense sources get FP8 blocks.
	if !fp8Source && !ignored {
		m.setScheme(KindPrefill, SchemeFP8Block)
	}
	// Decode: targets to INT4, the rest per --decode-dense.
	decode := m.denseFallback()
	switch {
	case ignored:
	case isTarget:
		decode = o.targetScheme()
		if why := unfit(m, decode, &o); why != "" {
			if o.OnUnsupported != UnsupportedSkip {
				return fmt.Errorf("convert: %s: tensor %q: %w: %s", m.Weight.Shard.Name, m.Weight.Name, refusal(decode), why)
			}
			m.Skipped = why
			p.Skipped = append(p.Skipped, m.Name+": "+why)
			decode = m.denseFallback()
		}
	case o.DecodeDense == DenseFP8:
		decode = SchemeFP8Block
		if fp8 {
			decode = SchemeFP8Keep
		}
	}
	if fp8 && decode == SchemeFP8Keep && !isBlockScale(m) {
		decode = SchemeBF16 // per-channel FP8 has no block form to keep
	}
	m.setScheme(KindDecode, decode)
	return nil
}

// isBlockScale reports whether the module's FP8 scale is laid out in 128x128 blocks.
func isBlockScale(m *Module) bool {
	s := m.Scale
	return s != nil && len(s.Shape) == 2 && s.Shape[0] == ceilDiv(int64(m.Rows), FP8BlockSize) && s.Shape[1] == ceilDiv(int64(m.Cols), FP8BlockSize)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// describe is used in error messages.
func (m *Module) describe() string {
	return fmt.Sprintf("%s: tensor %q", m.Weight.Shard.Name, m.Weight.Name)
}
