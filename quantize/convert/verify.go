package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"

	"pdq/internal/par"
	"pdq/quantize"
	"pdq/quantize/report"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// VerifyResult is what pdq verify found about one output checkpoint.
type VerifyResult struct {
	Output   string   `json:"output"` // "prefill" or "decode"
	Dir      string   `json:"dir"`
	Tensors  int      `json:"tensors"`
	Problems []string `json:"problems"`
	// report.Report holds the metrics recomputed from the files (no rtn comparison).
	Report *report.Report `json:"report"`
	// ReportChecked says whether a report.json beside the output was compared with report.Report.
	ReportChecked bool `json:"report_checked"`
}

// OK reports whether no problem was found.
func (v *VerifyResult) OK() bool { return len(v.Problems) == 0 }

func (v *VerifyResult) problem(format string, args ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
}

// Verify re-reads a source checkpoint and one output of a conversion (DIR/decode or DIR/prefill)
// and checks, independently of the run that wrote it: the output's headers and index (complete,
// every tensor once), that it holds exactly the tensors and config.json a plan of the same options
// gives, that copied tensors are byte-identical, and it recomputes the error metrics of every
// quantized tensor from the written bytes. A report.json in the output's parent directory is
// compared with the recomputed metrics.
func Verify(ctx context.Context, src *safetensors.Checkpoint, outDir string, workers int) (*VerifyResult, error) {
	v := &VerifyResult{Dir: outDir}
	out, err := safetensors.Open(outDir)
	if err != nil {
		return nil, fmt.Errorf("convert: verify: %w", err)
	}
	defer out.Close()
	if err := checkOrder(src, out); err != nil {
		return nil, err
	}
	v.Tensors = len(out.Tensors())
	verifyFiles(v, src, out)
	outCfg, err := rules.LoadConfig(out.Dir)
	if err != nil {
		return nil, err
	}
	srcCfg, err := rules.LoadConfig(src.Dir)
	if err != nil {
		return nil, err
	}
	opts, kind, err := optionsFromOutput(out, outCfg)
	if err != nil {
		return nil, err
	}
	v.Output = string(kind)
	p, err := NewPlan(src, srcCfg, opts)
	if err != nil {
		return nil, fmt.Errorf("convert: verify: re-plan: %w", err)
	}
	o := p.Output(kind)
	reportPath := filepath.Join(filepath.Dir(filepath.Clean(outDir)), "report.json")
	if o.CopySource {
		verifyCopy(ctx, v, src, out)
		v.Report = &report.Report{Source: src.Dir}
		compareReport(v, reportPath, p.Options.GroupSize) // a copy measures nothing: any row is a phantom
		return v, nil
	}
	verifyLayout(v, p, o, out, outCfg)
	if !v.OK() {
		return v, nil // metrics of a malformed output would only add noise
	}
	if err := verifyValues(ctx, v, p, kind, out, workers); err != nil {
		return nil, err
	}
	compareReport(v, reportPath, p.Options.GroupSize)
	return v, nil
}

// optionsFromOutput reads what a conversion did from the output itself: which modules are INT4,
// FP8 or dense, and the group size from config.json.
func optionsFromOutput(out *safetensors.Checkpoint, cfg map[string]any) (Options, OutputKind, error) {
	o := Options{TargetSet: map[string]bool{}, IgnoreSet: map[string]bool{}, OnUnsupported: UnsupportedSkip}
	qc := rules.QuantizationConfig(cfg)
	method, _ := qc["quant_method"].(string)
	kind := KindPrefill
	names := map[string]bool{}
	for _, t := range out.Tensors() {
		names[t.Name] = true
	}
	if format, _ := qc["format"].(string); method == "compressed-tensors" && !isDecodeFormat(format) {
		method = "fp8" // a compressed-tensors FP8 source passed through as the prefill output
	}
	switch method {
	case "compressed-tensors":
		kind = KindDecode
		o.DecodeDense = DenseBF16
		groups, _ := qc["config_groups"].(map[string]any)
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			readGroup(gm, &o)
			w, _ := gm["weights"].(map[string]any)
			if bits, _ := rules.IntOf(w["num_bits"]); bits == 4 {
				if gs, ok := rules.IntOf(w["group_size"]); ok {
					o.GroupSize = int(gs)
				} else {
					o.GroupSize = PerChannel
				}
			} else if bits == 8 {
				o.DecodeDense = DenseFP8
			}
		}
		for _, t := range out.Tensors() {
			if m, suffix := rules.ModuleOf(t.Name); suffix == "weight_packed" {
				o.TargetSet[m] = true
			}
		}
		if o.DecodeDense == DenseFP8 {
			// Linears left dense beside an FP8 group were ignored on purpose.
			for _, t := range out.Tensors() {
				if m, suffix := rules.ModuleOf(t.Name); suffix == "weight" && len(t.Shape) == 2 && t.DType != safetensors.F8E4M3 && !names[m+suffixPacked] {
					o.IgnoreSet[m] = true
				}
			}
		}
	case "fp8":
		for _, t := range out.Tensors() {
			if m, suffix := rules.ModuleOf(t.Name); suffix == "weight" && len(t.Shape) == 2 && t.DType != safetensors.F8E4M3 {
				o.IgnoreSet[m] = true
			}
		}
		o.Only = KindPrefill
	default:
		return o, "", fmt.Errorf("convert: verify: %s: %w: config.json has no quantization_config of a pdq output (quant_method %q)", out.Dir, ErrNotOutput, method)
	}
	if kind == KindDecode {
		o.Only = KindDecode
	}
	return o, kind, nil
}

// verifyCopy checks an output that should be the source's shards unchanged.
func verifyCopy(ctx context.Context, v *VerifyResult, src, out *safetensors.Checkpoint) {
	if len(src.Shards) != len(out.Shards) {
		v.problem("%d shards, the source has %d", len(out.Shards), len(src.Shards))
		return
	}
	for i, s := range src.Shards {
		_, a, err1 := hashFile(ctx, s.Path)
		_, b, err2 := hashFile(ctx, out.Shards[i].Path)
		if err1 != nil || err2 != nil || a != b || s.Name != out.Shards[i].Name {
			v.problem("shard %s is not a byte-identical copy of the source's %s", out.Shards[i].Name, s.Name)
		}
	}
}

// verifyLayout compares the output's tensors and config.json with the plan.
func verifyLayout(v *VerifyResult, p *Plan, o *Output, out *safetensors.Checkpoint, cfg map[string]any) {
	want := map[string]safetensors.TensorSpec{}
	for _, sh := range o.Shards {
		for _, s := range sh.Specs {
			want[s.Name] = s
		}
	}
	for _, t := range out.Tensors() {
		s, ok := want[t.Name]
		switch {
		case !ok:
			v.problem("tensor %q (shard %s) is not part of the conversion", t.Name, t.Shard.Name)
		case s.DType != t.DType || !reflect.DeepEqual(s.Shape, t.Shape):
			v.problem("tensor %q is %s %v, want %s %v", t.Name, t.DType, t.Shape, s.DType, s.Shape)
		}
		delete(want, t.Name)
	}
	missing := make([]string, 0, len(want))
	for n := range want {
		missing = append(missing, n)
	}
	sort.Strings(missing)
	for _, n := range missing {
		v.problem("tensor %q is missing", n)
	}
	a, _ := json.Marshal(o.Config)
	b, _ := json.Marshal(cfg)
	if !bytes.Equal(a, b) {
		v.problem("config.json differs from the one the plan gives (quantization_config or model keys)")
	}
}

// verifyValues recomputes the metrics of every converted module, and checks copies byte for byte.
func verifyValues(ctx context.Context, v *VerifyResult, p *Plan, kind OutputKind, out *safetensors.Checkpoint, workers int) error {
	type result struct {
		rec     *record
		problem string
	}
	results := make([]result, len(p.Modules))
	err := par.ForEach(ctx, len(p.Modules), workers, func(i int) error {
		rec, prob, err := verifyModule(ctx, p, kind, p.Modules[i], out)
		results[i] = result{rec, prob}
		return err
	})
	if err != nil {
		return err
	}
	rep := &report.Report{Source: p.Source.Dir, SourceLayout: p.Layout}
	sums := map[[3]string]*roleAcc{}
	for _, r := range results {
		if r.problem != "" {
			v.problem("%s", r.problem)
		}
		if r.rec == nil {
			continue
		}
		rep.Tensors = append(rep.Tensors, r.rec.Row)
		k := [3]string{string(kind), r.rec.Row.Role, r.rec.Row.Scheme}
		if sums[k] == nil {
			sums[k] = &roleAcc{}
		}
		sums[k].add(r.rec.Row, r.rec.M, nil)
	}
	finishReport(rep, sums)
	v.Report = rep
	return nil
}

// verifyModule reads one module from source and output and measures it: a copied module's
// tensors byte for byte against the source's, an encoded one's values against the source's.
func verifyModule(ctx context.Context, p *Plan, kind OutputKind, m *Module, out *safetensors.Checkpoint) (*record, string, error) {
	b := p.bound(m, kind)
	src := p.Source
	read := func(ck *safetensors.Checkpoint, name string) ([]byte, *safetensors.Tensor, error) {
		t := ck.Tensor(name)
		if t == nil {
			return nil, nil, fmt.Errorf("convert: verify: tensor %q missing", name)
		}
		buf := make([]byte, t.ByteSize())
		return buf, t, ck.ReadTensor(t, buf)
	}
	if copied := b.Copied(); copied != nil {
		for i, spec := range b.Specs() {
			a, _, err := read(src, copied[i])
			if err != nil {
				return nil, "", err
			}
			o, _, err := read(out, spec.Name)
			if err != nil {
				return nil, "", err
			}
			if !bytes.Equal(a, o) {
				return nil, fmt.Sprintf("tensor %q differs from source %q", spec.Name, copied[i]), nil
			}
		}
		if b.ValueTensor() == "" {
			return nil, "", nil
		}
		// a pass-through with a report row: its values are measured too
	}
	raw, _, err := read(src, m.Weight.Name)
	if err != nil {
		return nil, "", err
	}
	s := &slab{r0: 0, r1: m.Rows, raw: raw}
	if m.Scale != nil {
		if s.scaleRaw, _, err = read(src, m.Scale.Name); err != nil {
			return nil, "", err
		}
	}
	if m.Packed != nil {
		s.packed, err = readPackedRows(func(t *safetensors.Tensor, dst []byte, off int64) error {
			return src.ReadTensorAt(t, dst, off)
		}, m.Packed, 0, m.Rows)
		if err != nil {
			return nil, "", err
		}
	}
	vals := make([]float32, m.Rows*m.Cols)
	if err := decodeSource(nil, vals, m, s); err != nil {
		return nil, "", fmt.Errorf("convert: verify: %s: %w", m.describe(), err)
	}
	got := make([]float32, len(vals))
	prob, err := b.Dequantize(got, func(name string) ([]byte, *safetensors.Tensor, error) { return read(out, name) })
	if err != nil || prob != "" {
		return nil, prob, err
	}
	var met quantize.Metrics
	met.Add(vals, got, 0)
	row := newTensorReport(kind, m, b.ValueTensor(), b.Scheme(), met)
	return &record{Row: row, M: met}, "", ctx.Err()
}
