// Package convert plans and runs the conversion of a source checkpoint into a prefill (FP8 block)
// and a decode (compressed-tensors INT4) checkpoint, and checks what it wrote.
//
// Planning reads headers and config.json only: it decides a scheme for every module and computes
// every output shard's header and every tensor's offset, so output sizes are known before any
// tensor data is read.
package convert

import (
	"context"
	"fmt"
	"regexp"

	"pdq/quantize/rules"
	"pdq/safetensors"
)

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
	// Outputs are the outputs the plan writes, in the order of the output kinds (prefill, then
	// decode); Options.Only leaves one. Output finds one by kind.
	Outputs []*Output
	// Skipped lists targets kept dense under --on-unsupported skip, with the reason.
	Skipped []string
	// Warnings are facts about the outputs that the serving engines care about (tensor-parallel
	// divisibility), found from config.json.
	Warnings []string
	// ConfigFile, when set, is the config.json the outputs get instead of the source's (see
	// UseConfigFile); ConfigSHA256 is its hash, part of the plan ID.
	ConfigFile, ConfigSHA256 string
}

// Output returns the planned output of kind, or nil when the plan does not write it.
func (p *Plan) Output(kind OutputKind) *Output {
	for _, o := range p.Outputs {
		if o.Kind == kind {
			return o
		}
	}
	return nil
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
	for _, kind := range outputKinds {
		if o.Only != "" && o.Only != kind {
			continue
		}
		plan := p.planDecode
		if kind == KindPrefill {
			plan = p.planPrefill
		}
		out, err := plan()
		if err != nil {
			return nil, err
		}
		p.Outputs = append(p.Outputs, out)
	}
	p.Warnings = append(p.configWarnings(), p.engineWarnings()...)
	return p, nil
}

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
