// Package convert plans and runs the conversion of a source checkpoint into a prefill (FP8 block)
// and a decode (compressed-tensors INT4) checkpoint, and checks what it wrote.
//
// Planning reads headers and config.json only: it decides a scheme for every module and computes
// every output shard's header and every tensor's offset, so output sizes are known before any
// tensor data is read.
package convert

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"pdq/calib"
	"pdq/kernels"
	"pdq/quantize"
	"pdq/quantize/engines"
	"pdq/quantize/report"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// Scheme says what an output does with one source module (report.Scheme).
type Scheme = report.Scheme

// The schemes (see package report).
const (
	SchemeCopy     = report.SchemeCopy
	SchemeInt4     = report.SchemeInt4
	SchemeFP8Block = report.SchemeFP8Block
	SchemeFP8Keep  = report.SchemeFP8Keep
	SchemeBF16     = report.SchemeBF16
)

// DenseForm is what the decode checkpoint keeps for the Linears it does not make INT4.
type DenseForm string

// The dense forms.
const (
	DenseBF16 DenseForm = "bf16" // BF16 (loads in vLLM and SGLang)
	DenseFP8  DenseForm = "fp8"  // FP8 blocks, a second compressed-tensors group
)

// Unsupported is what planning does with a target the scheme cannot take.
type Unsupported string

// The choices for unsupported targets.
const (
	UnsupportedError Unsupported = "error" // refuse the plan (ErrUnsupported)
	UnsupportedSkip  Unsupported = "skip"  // keep the module dense and list it in Plan.Skipped
)

// DefaultTargets matches the routed-expert Linear modules of GLM, DeepSeek, Kimi and Qwen-style
// checkpoints: "model.layers.7.mlp.experts.42.gate_proj" and friends.
const DefaultTargets = `\.experts\.\d+\.(gate_proj|up_proj|down_proj|w1|w2|w3)$`

// FP8BlockSize is the block edge of the FP8 schemes pdq writes.
const FP8BlockSize = kernels.FP8Block

// DefaultMaxShardSize is the largest output shard unless told otherwise (5 GB, as the Hugging Face
// tools use).
const DefaultMaxShardSize = 5_000_000_000

// Options decide the plan.
type Options struct {
	GroupSize     int             // INT4 group size: 32, 64 or 128 (0 means DefaultGroupSize), or PerChannel
	Method        quantize.Method // INT4 scale method
	SignedScales  bool            // experimental Q4_0-style signed scales
	Targets       string          // regex over module names selecting INT4 modules (default DefaultTargets)
	Ignore        string          // regex over module names kept out of every quantization
	DecodeDense   DenseForm       // DenseBF16 (default) or DenseFP8: what the decode checkpoint keeps for non-target Linears
	Only          OutputKind      // "" (both), KindPrefill or KindDecode
	MaxShardSize  int64           // output shard cap (default DefaultMaxShardSize)
	OnUnsupported Unsupported     // UnsupportedError (default) or UnsupportedSkip: keep unsupported targets dense and list them
	// NoInt4OK accepts a decode output without any INT4 module (otherwise ErrNoTargets).
	NoInt4OK bool `json:",omitempty"`

	// Calib, when set, holds the calibration statistics the INT4 modules use (see CalibMethod);
	// the plan ID includes the file's SHA-256, so a resumed run refuses a different file.
	Calib         *calib.Stats `json:"-"`
	CalibMethod   string       `json:",omitempty"` // "weighted" (default with Calib) or "gptq"
	CalibActOrder bool         `json:",omitempty"` // gptq: process columns by decreasing E[x²]
	CalibDamp     float64      `json:",omitempty"` // gptq: dampening, fraction of the mean diagonal (0: 1%)

	// TargetSet and IgnoreSet, when not nil, replace the Targets and Ignore regexes with exact
	// module names (verify rebuilds a plan from what an output holds).
	TargetSet map[string]bool `json:"-"`
	IgnoreSet map[string]bool `json:"-"`
}

// Sentinel errors of planning.
var (
	// ErrUnsupported: a target module cannot take the scheme (dtype, shape, group size).
	ErrUnsupported = errors.New("unsupported module")
	// ErrMissingScale: an FP8 weight without its scale companion.
	ErrMissingScale = errors.New("FP8 weight without a scale companion")
	// ErrBadOptions: options that contradict each other or the source.
	ErrBadOptions = errors.New("invalid options")
	// ErrNoTargets: the decode output would hold no INT4 module (nothing matches the targets,
	// or the ignore pattern removes every match).
	ErrNoTargets = errors.New("no module to quantize to INT4")
)

// PerChannel as Options.GroupSize gives one INT4 scale per output channel.
const PerChannel = quantize.PerChannel

// DefaultGroupSize is the INT4 group size unless told otherwise.
const DefaultGroupSize = 32

// group returns the group length for a module with cols input features.
func (o *Options) group(cols int) int { return quantize.GroupWidth(o.GroupSize, cols) }

func (o *Options) defaults() error {
	if o.GroupSize == 0 {
		o.GroupSize = DefaultGroupSize
	}
	if o.Method == "" {
		o.Method = quantize.Method("mse")
	}
	if o.Targets == "" {
		o.Targets = DefaultTargets
	}
	if o.DecodeDense == "" {
		o.DecodeDense = DenseBF16
	}
	if o.MaxShardSize <= 0 {
		o.MaxShardSize = DefaultMaxShardSize
	}
	if o.OnUnsupported == "" {
		o.OnUnsupported = UnsupportedError
	}
	switch {
	case quantize.CheckGroupSize(o.GroupSize) != nil:
		return fmt.Errorf("%w: group size %d (want 32, 64 or 128, or per channel)", ErrBadOptions, o.GroupSize)
	case o.DecodeDense != DenseBF16 && o.DecodeDense != DenseFP8:
		return fmt.Errorf("%w: decode dense %q (want bf16 or fp8)", ErrBadOptions, o.DecodeDense)
	case o.Only != "" && o.Only != KindPrefill && o.Only != KindDecode:
		return fmt.Errorf("%w: only %q (want prefill or decode)", ErrBadOptions, o.Only)
	case o.OnUnsupported != UnsupportedError && o.OnUnsupported != UnsupportedSkip:
		return fmt.Errorf("%w: on-unsupported %q (want error or skip)", ErrBadOptions, o.OnUnsupported)
	case o.Method.Check() != nil:
		return fmt.Errorf("%w: %v", ErrBadOptions, o.Method.Check())
	case o.SignedScales && o.Method != "mse":
		return fmt.Errorf("%w: signed scales need the mse method, not %q", ErrBadOptions, o.Method)
	}
	return o.calibDefaults()
}

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

	bound []Bound // per output: its encoding bound to the module (Plan.bindAll)
}

// Output is the planned layout of one output checkpoint.
type Output struct {
	Kind   OutputKind
	Shards []safetensors.ShardPlan
	// CopySource: the output is the source's shard files unchanged (FP8 source prefill).
	CopySource bool
	// WriteConfig: with CopySource, Config is written instead of copying the source's config.json
	// (an FP8 source whose config has no quantization_config gets one, see copyConfig).
	WriteConfig bool
	Config      map[string]any // the config.json to write
	// Where maps each output tensor name to its shard index in Shards.
	Where map[string]int
}

// Bytes is the total size of the output's shard files.
func (o *Output) Bytes(src *safetensors.Checkpoint) int64 {
	var n int64
	if o.CopySource {
		for _, s := range src.Shards {
			n += s.Size
		}
		return n
	}
	for _, s := range o.Shards {
		n += s.Layout.FileSize
	}
	return n
}

// Plan is everything convert will do, computed from headers and config.json.
type Plan struct {
	Source  *safetensors.Checkpoint
	Layout  rules.Detected
	Config  map[string]any // the source config.json (nil when absent)
	Options Options
	Modules []*Module // in source file order
	Prefill *Output   // nil with Only == "decode"
	Decode  *Output   // nil with Only == "prefill"
	// Skipped lists targets kept dense under --on-unsupported skip, with the reason.
	Skipped []string
	// Warnings are facts about the outputs that the serving engines care about (tensor-parallel
	// divisibility), found from config.json.
	Warnings []string
	// ConfigFile, when set, is the config.json the outputs get instead of the source's (see
	// UseConfigFile); ConfigSHA256 is its hash, part of the plan ID.
	ConfigFile, ConfigSHA256 string
}

// outputs lists the outputs the plan writes, in order (prefill, then decode).
func (p *Plan) outputs() []*Output {
	var outs []*Output
	for _, o := range []*Output{p.Prefill, p.Decode} {
		if o != nil {
			outs = append(outs, o)
		}
	}
	return outs
}

// UseConfigFile records that Config was read from path (a config.json given for a source that
// has none, or instead of its own): an FP8 source's prefill output gets a copy of that file, and
// the plan ID includes its hash, so a resumed run refuses another file.
func (p *Plan) UseConfigFile(path string) error {
	_, sum, err := hashFile(context.Background(), path)
	if err != nil {
		return err
	}
	p.ConfigFile, p.ConfigSHA256 = path, sum
	return nil
}

// neverQuantized are roles whose 2-D weights no output quantizes (FORMATS.md §2).
var neverQuantized = map[rules.Role]bool{rules.RoleEmbedding: true, rules.RoleNorm: true, rules.RoleRouter: true}

// NewPlan plans the conversion of src.
func NewPlan(src *safetensors.Checkpoint, cfg map[string]any, o Options) (*Plan, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := rules.CheckConfig(cfg); err != nil {
		return nil, fmt.Errorf("convert: %s: %w", src.Dir, err)
	}
	targets, err := regexp.Compile(o.Targets)
	if err != nil {
		return nil, fmt.Errorf("%w: targets: %v", ErrBadOptions, err)
	}
	var ignore *regexp.Regexp
	if o.Ignore != "" {
		if ignore, err = regexp.Compile(o.Ignore); err != nil {
			return nil, fmt.Errorf("%w: ignore: %v", ErrBadOptions, err)
		}
	}
	ts := src.Tensors()
	p := &Plan{Source: src, Layout: rules.Detect(ts, cfg), Config: cfg, Options: o}
	if p.Layout.Layout == rules.LayoutCTInt4 {
		return nil, fmt.Errorf("%w: %s is already compressed-tensors INT4; convert from its BF16 or FP8 original", ErrQuantizedSource, src.Dir)
	}
	if p.Layout.Layout == rules.LayoutFP8Block && len(p.Layout.BlockSize) == 2 && (p.Layout.BlockSize[0] != FP8BlockSize || p.Layout.BlockSize[1] != FP8BlockSize) {
		return nil, fmt.Errorf("%w: FP8 block size %v (pdq reads %dx%d blocks)", ErrUnsupported, p.Layout.BlockSize, FP8BlockSize, FP8BlockSize)
	}
	if err := p.buildModules(ts, targets, ignore); err != nil {
		return nil, err
	}
	if err := p.checkTargets(targets, ignore); err != nil {
		return nil, err
	}
	if err := p.planCalib(); err != nil {
		return nil, err
	}
	p.bindAll()
	if o.Only != KindDecode {
		if p.Prefill, err = p.planPrefill(); err != nil {
			return nil, err
		}
	}
	if o.Only != KindPrefill {
		if p.Decode, err = p.planDecode(); err != nil {
			return nil, err
		}
	}
	p.Warnings = append(p.configWarnings(), p.engineWarnings()...)
	return p, nil
}

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
	fp8Source := p.Layout.FP8()
	for _, t := range ts {
		if companion[t.Name] {
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
		if !ok || m.Scheme(KindDecode) != SchemeInt4 {
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
		decode = SchemeInt4
		g := o.group(m.Cols)
		var why string
		switch {
		case m.Cols == 0:
			why = "no in features"
		case m.Cols%g != 0:
			why = fmt.Sprintf("in features %d not a multiple of group size %d", m.Cols, g)
		case m.Cols%8 != 0:
			why = fmt.Sprintf("in features %d not a multiple of 8 (packing)", m.Cols)
		}
		if why != "" {
			if o.OnUnsupported != UnsupportedSkip {
				return fmt.Errorf("convert: %s: tensor %q: %w: %s", m.Weight.Shard.Name, m.Weight.Name, ErrUnsupported, why)
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

// OutputSpecs returns the tensors module m contributes to output kind.
func (p *Plan) OutputSpecs(m *Module, kind OutputKind) []safetensors.TensorSpec {
	return p.bound(m, kind).Specs()
}

func (p *Plan) planOutput(kind OutputKind) (*Output, error) {
	specs := make([]safetensors.TensorSpec, 0, 3*len(p.Modules))
	for _, m := range p.Modules {
		specs = append(specs, p.OutputSpecs(m, kind)...)
	}
	meta := map[string]string{"producer": "pdq"}
	shards, err := safetensors.PlanShards(specs, p.Options.MaxShardSize, meta)
	if err != nil {
		return nil, fmt.Errorf("convert: plan %s shards: %w", kind, err)
	}
	out := &Output{Kind: kind, Shards: shards, Where: make(map[string]int, len(specs))}
	for i, s := range shards {
		for _, t := range s.Specs {
			out.Where[t.Name] = i
		}
	}
	return out, nil
}

func (p *Plan) planPrefill() (*Output, error) {
	if p.Layout.FP8() {
		return p.copyOutput(), nil
	}
	out, err := p.planOutput(KindPrefill)
	if err != nil {
		return nil, err
	}
	out.Config = p.prefillConfig()
	return out, nil
}

func (p *Plan) planDecode() (*Output, error) {
	out, err := p.planOutput(KindDecode)
	if err != nil {
		return nil, err
	}
	out.Config = p.decodeConfig()
	return out, nil
}

// Counts returns, per role and scheme, the number of modules of an output.
func (p *Plan) Counts(kind OutputKind) map[string]map[string]int {
	c := map[string]map[string]int{}
	for _, m := range p.Modules {
		s := m.Scheme(kind)
		if c[string(m.Role)] == nil {
			c[string(m.Role)] = map[string]int{}
		}
		c[string(m.Role)][string(s)]++
	}
	return c
}

// describe is used in error messages.
func (m *Module) describe() string {
	return fmt.Sprintf("%s: tensor %q", m.Weight.Shard.Name, m.Weight.Name)
}
