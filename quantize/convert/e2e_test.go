package convert_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/report"
	"pdq/safetensors"
)

// The checks below decode what convert wrote with code of their own, straight from FORMATS.md
// §4 and §5: they share no unpacking code with the converter.

// reTargetWeight is the routed-expert Linear weight the default plan turns into INT4.
var reTargetWeight = regexp.MustCompile(`\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight$`)

// expect says which source weights the decode output holds as INT4, with which group size.
type expect struct {
	group int64
	int4  func(weight string) bool
	none  bool // no module is expected in INT4
}

// defaultExpect is the default plan: routed experts in groups of 32.
var defaultExpect = expect{group: 32, int4: reTargetWeight.MatchString}

// sideFiles are the non-weight files a checkpoint ships and both outputs must carry unchanged.
var sideFiles = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"}

// TestEndToEnd converts a dense BF16 GLM-4-style and an FP8-block DeepSeek-style checkpoint and
// checks every tensor, config and side file of both outputs, the report's figures and the plan's
// size predictions.
func TestEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  func(testing.TB) string
		fp8  bool
	}{
		{"glm4-bf16", glm4Source, false},
		{"deepseek-fp8", deepseekSource, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			out := filepath.Join(t.TempDir(), "out")
			p := plan(t, src, convert.Options{GroupSize: 32, MaxShardSize: 1 << 20})
			ret, err := runPlan(p, out, convert.RunOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			rep := readReport(t, out)
			if !reflect.DeepEqual(normalizeReport(t, ret), normalizeReport(t, rep)) {
				t.Errorf("the returned report differs from report.json")
			}
			srcT := readTensors(t, src)
			checkPlanSizes(t, p, out, rep)
			checkDecodeTensors(t, defaultExpect, srcT, readTensors(t, filepath.Join(out, "decode")), rep)
			checkDecodeConfig(t, defaultExpect, src, srcT, filepath.Join(out, "decode"))
			if len(ret.Skipped) != 0 {
				t.Errorf("skipped %v", ret.Skipped)
			}
			for _, kind := range []string{"prefill", "decode"} {
				for _, f := range sideFiles {
					want, err := os.ReadFile(filepath.Join(src, f))
					if err != nil {
						t.Fatal(err)
					}
					got, err := os.ReadFile(filepath.Join(out, kind, f))
					if err != nil || !bytes.Equal(got, want) {
						t.Errorf("%s/%s: not a copy of the source's (%v)", kind, f, err)
					}
				}
			}
			if tc.fp8 {
				checkPrefillPassThrough(t, src, filepath.Join(out, "prefill"))
			} else {
				checkPrefillFP8(t, src, srcT, filepath.Join(out, "prefill"), rep)
			}
		})
	}
}

// readReport parses DIR/report.json.
func readReport(t testing.TB, out string) *report.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	return &r
}

// normalizeReport round-trips a report through JSON so that a returned and a parsed one compare.
func normalizeReport(t testing.TB, r *report.Report) any {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// reportRow finds the report row of an output tensor.
func reportRow(rep *report.Report, output, tensor string) *report.TensorReport {
	for i := range rep.Tensors {
		if rep.Tensors[i].Output == output && rep.Tensors[i].Tensor == tensor {
			return &rep.Tensors[i]
		}
	}
	return nil
}

// sourceValues returns a source weight's own dequantized values: FP8 codes times the block
// scale of weight_scale_inv, or the dense values as stored.
func sourceValues(t testing.TB, srcT map[string]*tensor, name string) []float32 {
	t.Helper()
	w := srcT[name]
	if w.DType != safetensors.F8E4M3 {
		return w.floats(t)
	}
	s := srcT[strings.TrimSuffix(name, ".weight")+".weight_scale_inv"]
	if s == nil {
		t.Fatalf("%s: FP8 without weight_scale_inv", name)
	}
	scale := s.floats(t)
	n, k := int(w.Shape[0]), int(w.Shape[1])
	sc := (k + 127) / 128
	if !sameShape(s.Shape, []int64{int64((n + 127) / 128), int64(sc)}) {
		t.Fatalf("%s: scale shape %v", name, s.Shape)
	}
	v := make([]float32, n*k)
	for i := range n {
		for j := range k {
			v[i*k+j] = safetensors.F8E4M3ToFloat32(w.Raw[i*k+j]) * scale[(i/128)*sc+j/128]
		}
	}
	return v
}

// sqnrDB is 10·log10(Σx²/Σ(x-y)²) in float64.
func sqnrDB(sig, noise float64) float64 {
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}

// checkSQNR compares an SQNR computed here with the report's.
func checkSQNR(t testing.TB, what string, got float64, row *report.TensorReport) {
	t.Helper()
	want := float64(row.SQNR)
	if math.IsInf(got, 1) && math.IsInf(want, 1) {
		return
	}
	if math.Abs(got-want) > 1e-6*math.Abs(got) {
		t.Errorf("%s: SQNR %.9f dB measured here, %.9f dB in report.json", what, got, want)
	}
}

// checkDecodeTensors checks that every source tensor appears exactly once in the decode output:
// routed experts as pack-quantized INT4 within half a step of the source (clipped elements
// aside) with the report's SQNR, FP8 non-targets as BF16 of their dequantized values, and
// everything else byte-identical.
func checkDecodeTensors(t *testing.T, ex expect, srcT, dec map[string]*tensor, rep *report.Report) {
	want := map[string]bool{}
	targets := 0
	for name, x := range srcT {
		switch {
		case strings.HasSuffix(name, ".weight_scale_inv"):
			if w := srcT[strings.TrimSuffix(name, "_scale_inv")]; w == nil || w.DType != safetensors.F8E4M3 {
				t.Fatalf("source %s has no FP8 weight", name)
			}
		case ex.int4(name):
			m := strings.TrimSuffix(name, ".weight")
			want[m+".weight_packed"], want[m+".weight_scale"], want[m+".weight_shape"] = true, true, true
			targets++
			checkInt4(t, ex.group, name, sourceValues(t, srcT, name), x.Shape, dec, rep)
		default:
			want[name] = true
			d := dec[name]
			if d == nil {
				continue // reported below
			}
			if x.DType == safetensors.F8E4M3 {
				checkBF16Of(t, name, sourceValues(t, srcT, name), x.Shape, d)
			} else if d.DType != x.DType || !sameShape(d.Shape, x.Shape) || !bytes.Equal(d.Raw, x.Raw) {
				t.Errorf("decode %s: not a copy of the source (%s %v vs %s %v)", name, d.DType, d.Shape, x.DType, x.Shape)
			}
		}
	}
	if targets == 0 && !ex.none {
		t.Fatal("no routed experts in the source")
	}
	for name := range want {
		if dec[name] == nil {
			t.Errorf("decode: missing %s", name)
		}
	}
	for name := range dec {
		if !want[name] {
			t.Errorf("decode: unexpected tensor %s", name)
		}
	}
}

// checkInt4 unpacks M.weight_packed/weight_scale/weight_shape and compares them with the source.
func checkInt4(t *testing.T, g int64, name string, x []float32, shape []int64, dec map[string]*tensor, rep *report.Report) {
	m := strings.TrimSuffix(name, ".weight")
	pk, sc, sh := dec[m+".weight_packed"], dec[m+".weight_scale"], dec[m+".weight_shape"]
	if pk == nil || sc == nil || sh == nil {
		t.Errorf("decode %s: packed/scale/shape missing", m)
		return
	}
	n, k := shape[0], shape[1]
	switch {
	case pk.DType != safetensors.I32 || !sameShape(pk.Shape, []int64{n, k / 8}):
		t.Errorf("%s.weight_packed: %s %v, want I32 [%d %d]", m, pk.DType, pk.Shape, n, k/8)
		return
	case sc.DType != safetensors.BF16 || !sameShape(sc.Shape, []int64{n, k / g}):
		t.Errorf("%s.weight_scale: %s %v, want BF16 [%d %d]", m, sc.DType, sc.Shape, n, k/g)
		return
	case sh.DType != safetensors.I64 || !sameShape(sh.Shape, []int64{2}):
		t.Errorf("%s.weight_shape: %s %v, want I64 [2]", m, sh.DType, sh.Shape)
		return
	}
	if a, b := int64(binary.LittleEndian.Uint64(sh.Raw)), int64(binary.LittleEndian.Uint64(sh.Raw[8:])); a != n || b != k {
		t.Errorf("%s.weight_shape = [%d %d], want [%d %d]", m, a, b, n, k)
	}
	var sig, noise float64
	var sure, maybe int64
	bad := 0
	for i := range n {
		for j := range k {
			word := binary.LittleEndian.Uint32(pk.Raw[4*(i*(k/8)+j/8):])
			q := int32(word>>(4*(j%8))&0xf) - 8
			s := safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(sc.Raw[2*(i*(k/g)+j/g):]))
			v := x[i*k+j]
			got := float32(q) * s
			sig += float64(v) * float64(v)
			noise += (float64(got) - float64(v)) * (float64(got) - float64(v))
			if s < 0 || math.IsNaN(float64(s)) {
				t.Fatalf("%s: scale [%d,%d] is %v (want positive)", m, i, j/g, s)
			}
			if s == 0 {
				if q != 0 || math.Abs(float64(v)) > 1e-30 {
					t.Errorf("%s[%d,%d]: level %d, value %g with a zero scale", m, i, j, q, v)
				}
				continue
			}
			// Elements beyond the last level's rounding range are clipped to it; the
			// quantizer counts them in float32, so those within a hair of the edge may go
			// either way in its count.
			r := float64(v) / float64(s)
			const tol = 1e-5
			edge := r >= 7.5*(1-tol) || r <= -8.5*(1-tol)
			if edge && (r <= 7.5*(1+tol) && r >= -8.5*(1+tol)) {
				maybe++
			}
			if r > 7.5 || r < -8.5 {
				if r > 7.5*(1+tol) || r < -8.5*(1+tol) {
					sure++
				}
				if (r > 0 && q != 7) || (r < 0 && q != -8) {
					t.Errorf("%s[%d,%d]: %g clipped to level %d (scale %g)", m, i, j, v, q, s)
				}
				continue
			}
			if e := math.Abs(float64(got) - float64(v)); e > float64(s)/2*(1+tol)+1e-30 {
				if bad++; bad <= 5 {
					t.Errorf("%s[%d,%d]: %g decodes to %g (level %d, scale %g): error %g over half a step", m, i, j, v, got, q, s, e)
				}
			}
		}
	}
	row := reportRow(rep, "decode", m+".weight_packed")
	if row == nil {
		t.Errorf("report.json: no decode row for %s", m)
		return
	}
	checkSQNR(t, m, sqnrDB(sig, noise), row)
	if row.Elements != n*k || row.Scheme != "int4" || int64(row.GroupSize) != g {
		t.Errorf("report row %s: elements %d scheme %s group %d", m, row.Elements, row.Scheme, row.GroupSize)
	}
	if row.Clipped < sure || row.Clipped > sure+maybe {
		t.Errorf("%s: report says %d clipped, counted %d (+%d at the boundary)", m, row.Clipped, sure, maybe)
	}
}

// checkBF16Of checks a BF16 tensor against RoundBF16 of the source values.
func checkBF16Of(t *testing.T, name string, x []float32, shape []int64, d *tensor) {
	if d.DType != safetensors.BF16 || !sameShape(d.Shape, shape) {
		t.Errorf("decode %s: %s %v, want BF16 %v", name, d.DType, d.Shape, shape)
		return
	}
	for i, v := range x {
		if got := binary.LittleEndian.Uint16(d.Raw[2*i:]); got != safetensors.Float32ToBF16(v) {
			t.Errorf("decode %s[%d]: %#04x, want BF16 of %g", name, i, got, v)
			return
		}
	}
}

// linearModules returns the source's Linear modules: every 2-D ".weight" but the embeddings.
func linearModules(srcT map[string]*tensor) []string {
	var mods []string
	for name, x := range srcT {
		if strings.HasSuffix(name, ".weight") && len(x.Shape) == 2 && !strings.Contains(name, "embed_tokens") {
			mods = append(mods, strings.TrimSuffix(name, ".weight"))
		}
	}
	sort.Strings(mods)
	return mods
}

// ignoreMatches applies one compressed-tensors ignore entry the way the engines do: an exact
// name, or "re:" and Python's re.match (anchored at the start only).
func ignoreMatches(t testing.TB, entry, module string) bool {
	if p, ok := strings.CutPrefix(entry, "re:"); ok {
		re, err := regexp.Compile(`^(?:` + p + `)`)
		if err != nil {
			t.Fatalf("ignore entry %q: %v", entry, err)
		}
		return re.MatchString(module)
	}
	return entry == module
}

// checkDecodeConfig checks the compressed-tensors quantization_config of FORMATS.md §4 and that
// the rest of config.json is the source's.
func checkDecodeConfig(t *testing.T, ex expect, src string, srcT map[string]*tensor, dec string) {
	cfg := readJSON(t, filepath.Join(dec, "config.json"))
	qc, ok := cfg["quantization_config"].(map[string]any)
	if !ok {
		t.Fatalf("decode config.json: no quantization_config")
	}
	for k, v := range map[string]any{
		"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
		"kv_cache_scheme": nil, "sparsity_config": map[string]any{}, "global_compression_ratio": nil,
	} {
		if got, ok := qc[k]; !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("quantization_config.%s = %#v, want %#v", k, got, v)
		}
	}
	if v, _ := qc["version"].(string); v == "" {
		t.Errorf("quantization_config.version missing")
	}
	groups, _ := qc["config_groups"].(map[string]any)
	if len(groups) != 1 {
		t.Errorf("config_groups: %v, want group_0 only", groups)
	}
	g0, _ := groups["group_0"].(map[string]any)
	for k, v := range map[string]any{
		"targets": []any{"Linear"}, "input_activations": nil, "output_activations": nil,
	} {
		if got, ok := g0[k]; !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("group_0.%s = %#v, want %#v", k, got, v)
		}
	}
	if f, ok := g0["format"]; ok && f != "pack-quantized" {
		t.Errorf("group_0.format = %v", f)
	}
	w, _ := g0["weights"].(map[string]any)
	for k, v := range map[string]any{
		"num_bits": 4.0, "type": "int", "symmetric": true, "strategy": "group",
		"dynamic": false, "actorder": nil, "observer": "minmax", "group_size": float64(ex.group),
	} {
		if got, ok := w[k]; !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("group_0.weights.%s = %#v, want %#v", k, got, v)
		}
	}
	var ignore []string
	raw, _ := qc["ignore"].([]any)
	for _, e := range raw {
		s, ok := e.(string)
		if !ok {
			t.Fatalf("ignore entry %#v is not a string", e)
		}
		ignore = append(ignore, s)
	}
	kinds := map[string]int{}
	for _, m := range linearModules(srcT) {
		int4 := ex.int4(m + ".weight")
		var hit []string
		for _, e := range ignore {
			if ignoreMatches(t, e, m) {
				hit = append(hit, e)
			}
		}
		switch {
		case int4 && len(hit) > 0:
			t.Errorf("INT4 module %s matched by ignore %q", m, hit)
		case !int4 && len(hit) == 0:
			t.Errorf("non-INT4 Linear %s matched by no ignore entry (ignore = %q)", m, ignore)
		}
		for _, k := range []string{"self_attn", "shared_experts", "mlp.gate_proj", "lm_head", "experts."} {
			if strings.Contains(m, k) {
				kinds[k]++
			}
		}
		if strings.HasSuffix(m, ".mlp.gate") {
			kinds["router"]++
		}
	}
	for _, k := range []string{"self_attn", "shared_experts", "mlp.gate_proj", "router", "lm_head", "experts."} {
		if kinds[k] == 0 {
			t.Errorf("the source has no %s module: the check proves little", k)
		}
	}
	want := readJSON(t, filepath.Join(src, "config.json"))
	delete(want, "quantization_config")
	delete(cfg, "quantization_config")
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("decode config.json differs from the source beyond quantization_config:\n got %v\nwant %v", cfg, want)
	}
}

// checkPrefillPassThrough: an FP8-block source's shards, index and config.json reach prefill/
// byte for byte, and nothing else that looks like weights does.
func checkPrefillPassThrough(t *testing.T, src, pre string) {
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	shards := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".safetensors") && name != safetensors.IndexFileName && name != "config.json" {
			continue
		}
		shards++
		want, _ := os.ReadFile(filepath.Join(src, name))
		got, err := os.ReadFile(filepath.Join(pre, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("prefill/%s: not byte-identical to the source (%v)", name, err)
		}
	}
	if shards < 4 {
		t.Errorf("only %d files compared", shards)
	}
	got, _ := os.ReadDir(pre)
	for _, e := range got {
		if _, err := os.Stat(filepath.Join(src, e.Name())); err != nil {
			t.Errorf("prefill/%s is not in the source", e.Name())
		}
	}
}

// neverFP8 reports the 2-D weights a dense source's prefill keeps as they are.
func neverFP8(name string) bool {
	return strings.Contains(name, "embed_tokens") || strings.HasPrefix(name, "lm_head") ||
		strings.HasSuffix(name, ".mlp.gate.weight") || strings.Contains(name, "norm")
}

// checkPrefillFP8 checks the FP8-block prefill of a dense source (FORMATS.md §5).
func checkPrefillFP8(t *testing.T, src string, srcT map[string]*tensor, pre string, rep *report.Report) {
	preT := readTensors(t, pre)
	want := map[string]bool{}
	quantized := 0
	for name, x := range srcT {
		want[name] = true
		if !strings.HasSuffix(name, ".weight") || len(x.Shape) != 2 || neverFP8(name) {
			if p := preT[name]; p == nil || p.DType != x.DType || !sameShape(p.Shape, x.Shape) || !bytes.Equal(p.Raw, x.Raw) {
				t.Errorf("prefill %s: not a copy of the source", name)
			}
			continue
		}
		quantized++
		m := strings.TrimSuffix(name, ".weight")
		want[m+".weight_scale_inv"] = true
		w, s := preT[name], preT[m+".weight_scale_inv"]
		n, k := int(x.Shape[0]), int(x.Shape[1])
		bc := (k + 127) / 128
		if w == nil || s == nil || w.DType != safetensors.F8E4M3 || !sameShape(w.Shape, x.Shape) ||
			s.DType != safetensors.F32 || !sameShape(s.Shape, []int64{int64((n + 127) / 128), int64(bc)}) {
			t.Errorf("prefill %s: want F8_E4M3 %v and F32 weight_scale_inv [%d %d]", m, x.Shape, (n+127)/128, bc)
			continue
		}
		v := x.floats(t)
		scale := s.floats(t)
		amax := make([]float32, len(scale))
		for i := range n {
			for j := range k {
				b := (i/128)*bc + j/128
				amax[b] = max(amax[b], float32(math.Abs(float64(v[i*k+j]))))
			}
		}
		for b, a := range amax {
			ws := a / 448
			if a == 0 {
				ws = 1
			}
			if scale[b] != ws {
				t.Errorf("prefill %s: block %d scale %g, want absmax/448 = %g", m, b, scale[b], ws)
			}
		}
		var sig, noise float64
		bad := 0
		for i := range n {
			for j := range k {
				sc := scale[(i/128)*bc+j/128]
				got := safetensors.F8E4M3ToFloat32(w.Raw[i*k+j]) * sc
				x := float64(v[i*k+j])
				e := math.Abs(float64(got) - x)
				sig += x * x
				noise += e * e
				if bound := math.Max(math.Abs(x)/16, float64(sc)/1024) + 1e-6*math.Abs(x); e > bound {
					if bad++; bad <= 5 {
						t.Errorf("prefill %s[%d,%d]: %g decodes to %g, beyond the FP8 rounding bound %g", m, i, j, x, got, bound)
					}
				}
			}
		}
		if row := reportRow(rep, "prefill", name); row == nil {
			t.Errorf("report.json: no prefill row for %s", name)
		} else {
			checkSQNR(t, "prefill "+m, sqnrDB(sig, noise), row)
		}
	}
	if quantized == 0 {
		t.Fatal("nothing quantized to FP8")
	}
	for name := range want {
		if preT[name] == nil {
			t.Errorf("prefill: missing %s", name)
		}
	}
	for name := range preT {
		if !want[name] {
			t.Errorf("prefill: unexpected tensor %s", name)
		}
	}
	cfg := readJSON(t, filepath.Join(pre, "config.json"))
	qc, _ := cfg["quantization_config"].(map[string]any)
	for k, v := range map[string]any{
		"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": []any{128.0, 128.0},
	} {
		if !reflect.DeepEqual(qc[k], v) {
			t.Errorf("prefill quantization_config.%s = %#v, want %#v", k, qc[k], v)
		}
	}
	srcCfg := readJSON(t, filepath.Join(src, "config.json"))
	delete(cfg, "quantization_config")
	if !reflect.DeepEqual(cfg, srcCfg) {
		t.Errorf("prefill config.json differs from the source beyond quantization_config")
	}
}

// checkPlanSizes: the plan's predicted sizes are the written sizes, shard by shard.
func checkPlanSizes(t *testing.T, p *convert.Plan, out string, rep *report.Report) {
	for _, o := range p.Outputs {
		dir := filepath.Join(out, string(o.Kind))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var written int64
		files := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				written += fi.Size()
				files++
			}
		}
		if planned := o.Bytes(p.Source); planned != written {
			t.Errorf("%s: plan says %d bytes, wrote %d", o.Kind, planned, written)
		}
		if !o.CopySource {
			if files != len(o.Shards) || files < 2 {
				t.Errorf("%s: %d shard files, planned %d (want several)", o.Kind, files, len(o.Shards))
			}
			var sum int64
			for _, s := range o.Shards {
				sum += s.Layout.FileSize
				fi, err := os.Stat(filepath.Join(dir, s.FileName))
				if err != nil || fi.Size() != s.Layout.FileSize {
					t.Errorf("%s/%s: planned %d bytes (%v)", o.Kind, s.FileName, s.Layout.FileSize, err)
				}
			}
			if sum != written {
				t.Errorf("%s: planned shard sizes sum to %d, wrote %d", o.Kind, sum, written)
			}
		}
		want := rep.DecodeBytes
		if o.Kind == "prefill" {
			want = rep.PrefillBytes
		}
		if want != written {
			t.Errorf("report: %s_bytes %d, wrote %d", o.Kind, want, written)
		}
	}
}

// TestReviewProgressReachesTotal: the progress callback ends at done == total, also for an FP8
// source whose modules read scale tensors besides their weights.
func TestProgressReachesTotal(t *testing.T) {
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, fp8Tensor("model.layers.1.self_attn.q_proj.weight", 2, 200, 256, false)...)
	ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 3, 64, 128, false)...)
	src := writeCheckpoint(t, ts, fp8Config)
	var mu sync.Mutex
	var last, total int64
	ro := convert.RunOptions{Workers: 2, Progress: func(d, tot int64, _ string) {
		mu.Lock()
		defer mu.Unlock()
		last, total = max(last, d), tot
	}}
	convertTo(t, src, filepath.Join(t.TempDir(), "out"), convert.Options{}, ro)
	if last != total || total == 0 {
		t.Errorf("progress ended at %d of %d bytes", last, total)
	}
}

// TestReviewInputScaleDropped: a compressed-tensors FP8 source may carry static activation
// scales (M.input_scale, FORMATS.md §2). The decode checkpoint turns those modules into INT4 or
// BF16 with no activation quantization, so an input_scale left beside them is a tensor no
// engine parameter takes; the prefill copy keeps it.
func TestInputScaleDropped(t *testing.T) {
	const expert, attn = "model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.self_attn.q_proj"
	inScale := func(module string) raw {
		b := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.01))
		return raw{module + ".input_scale", safetensors.F32, []int64{1}, b}
	}
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, ctFP8Tensor(attn, 2, 128, 128)...)
	ts = append(ts, inScale(attn))
	ts = append(ts, ctFP8Tensor(expert, 3, 64, 128)...)
	ts = append(ts, inScale(expert))
	src := writeCheckpoint(t, ts, map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
		"quant_method": "compressed-tensors", "format": "float-quantized"}})
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
	dec := readTensors(t, filepath.Join(out, "decode"))
	for _, m := range []string{expert, attn} {
		if dec[m+".input_scale"] != nil {
			t.Errorf("decode holds %s.input_scale beside a module without activation quantization", m)
		}
	}
	if dec[expert+".weight_packed"] == nil || dec[attn+".weight"] == nil {
		t.Errorf("decode misses the converted modules")
	}
	pre := readTensors(t, filepath.Join(out, "prefill"))
	if pre[expert+".input_scale"] == nil {
		t.Errorf("prefill copy lost %s.input_scale", expert)
	}
}

// TestReviewPerChannelAnyWidth: --group-size 0 (one INT4 scale per output channel) converts
// experts whose in features are not 32, 64 or 128 (every real model: K = 2048, 7168, ...), and
// verify accepts what it wrote.
func TestPerChannelAnyWidth(t *testing.T) {
	const e = "model.layers.1.mlp.experts.0."
	src := writeCheckpoint(t, []raw{
		bf16Tensor("model.embed_tokens.weight", 1, 16, 136),
		bf16Tensor(e+"gate_proj.weight", 2, 64, 136),
		bf16Tensor(e+"up_proj.weight", 3, 64, 136),
		bf16Tensor(e+"down_proj.weight", 4, 136, 64),
	}, map[string]any{"model_type": "glm4_moe"})
	out := filepath.Join(t.TempDir(), "out")
	o := convert.Options{GroupSize: convert.PerChannel, Only: "decode"}
	if _, err := runPlan(plan(t, src, o), out, convert.RunOptions{Workers: 2}); err != nil {
		t.Fatalf("per-channel conversion: %v", err)
	}
	dec := readTensors(t, filepath.Join(out, "decode"))
	if s := dec[e+"gate_proj.weight_scale"]; s == nil || !sameShape(s.Shape, []int64{64, 1}) {
		t.Errorf("gate_proj.weight_scale: %+v, want shape [64 1]", s)
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := convert.Verify(context.Background(), ck, filepath.Join(out, "decode"), 2)
	if err != nil || !v.OK() {
		t.Errorf("verify: %v %v", err, v)
	}
}

// ctFP8Tensor returns a compressed-tensors FP8 weight [n, k] with its per-channel weight_scale
// [n, 1] (the GLM-4.x-FP8 layout).
func ctFP8Tensor(module string, seed uint64, n, k int64) []raw {
	b := make([]byte, n*k)
	for i, v := range weights(seed, int(n*k)) {
		b[i] = safetensors.Float32ToF8E4M3(v * 448 / 0.1)
	}
	s := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(s[4*i:], math.Float32bits(0.1/448))
	}
	return []raw{{module + ".weight", safetensors.F8E4M3, []int64{n, k}, b}, {module + ".weight_scale", safetensors.F32, []int64{n, 1}, s}}
}

// TestReviewVerifyCTFP8Prefill: the prefill output of a compressed-tensors FP8 source is the
// source unchanged (its config says compressed-tensors too); verify checks it as a prefill copy,
// not as a decode checkpoint, and still notices a changed byte.
func TestVerifyCTFP8Prefill(t *testing.T) {
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, ctFP8Tensor("model.layers.1.self_attn.q_proj", 2, 128, 128)...)
	ts = append(ts, ctFP8Tensor("model.layers.1.mlp.experts.0.gate_proj", 3, 64, 128)...)
	src := writeCheckpoint(t, ts, map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
		"quant_method": "compressed-tensors", "format": "float-quantized"}})
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	pre := filepath.Join(out, "prefill")
	v, err := convert.Verify(context.Background(), ck, pre, 2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Output != "prefill" || !v.OK() {
		t.Fatalf("verify prefill: output %q, problems %v", v.Output, v.Problems)
	}
	// The same check must fail on a copy that differs.
	shard := filepath.Join(pre, "model.safetensors")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := convert.Verify(context.Background(), ck, pre, 2); err != nil || v.OK() {
		t.Errorf("verify of a changed prefill copy: err %v, problems %v", err, v)
	}
}
