package compare_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"pdq/quantize"
	"pdq/quantize/compare"
	"pdq/quantize/convert"
	"pdq/quantize/report"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/serving"
	"pdq/synth"
)

var (
	srcMu   sync.Mutex
	sources = map[string]string{}
)

// source generates (once per test binary) a synthetic checkpoint: "bf16" and "fp8" are the
// tiny DeepSeek-style model, "glm4" the tiny GLM-4 one, "slabs" a model whose experts span two
// slabs each.
func source(t *testing.T, kind string) string {
	t.Helper()
	srcMu.Lock()
	defer srcMu.Unlock()
	if dir, ok := sources[kind]; ok {
		return dir
	}
	dir := filepath.Join(sharedDir, kind)
	o := synth.Options{Model: synth.Tiny(synth.StyleDeepSeek), Seed: 7, MaxShardBytes: 1 << 20, Workers: 2}
	switch kind {
	case "fp8":
		o.FP8 = true
	case "glm4":
		o.Model = synth.Tiny(synth.StyleGLM4)
	case "odd":
		o.Model = synth.Tiny(synth.StyleGLM4)
		o.Model.MoEIntermediate = 96 // down_proj has 96 in features: not a multiple of 64 or 128
	case "slabs":
		// gate and up 4608×1024 and down 1024×4608: more than one 4 Mi-element slab each.
		m := synth.Tiny(synth.StyleGLM4)
		m.Hidden, m.MoEIntermediate, m.Intermediate, m.Layers, m.Experts, m.SharedExperts = 1024, 4608, 256, 2, 2, 0
		m.Vocab = 256
		o.Model, o.FP8, o.MaxShardBytes = m, true, 64<<20
	}
	if err := synth.Generate(context.Background(), dir, o); err != nil {
		t.Fatalf("generate %s: %v", kind, err)
	}
	sources[kind] = dir
	return dir
}

var sharedDir string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "pdq-compare-test")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		sharedDir = dir
		return m.Run()
	}()
	os.Exit(code)
}

// plan plans src the way pdq compare does (per channel, decode only), or with o when given.
func plan(t *testing.T, src string, o *convert.Options) *convert.Plan {
	t.Helper()
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	cfg, err := rules.LoadConfig(ck.Dir)
	if err != nil {
		t.Fatal(err)
	}
	opt := convert.Options{GroupSize: convert.PerChannel, Only: convert.KindDecode, OnUnsupported: convert.UnsupportedSkip}
	if o != nil {
		opt = *o
	}
	p, err := convert.NewPlan(ck, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func formats(t *testing.T, s string) []compare.Format {
	t.Helper()
	fs, err := compare.ParseFormats(s)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// convertReport converts src to a decode checkpoint with options o and returns its report's
// decode rows by module, and its routed experts' summary.
func convertReport(t *testing.T, src string, o convert.Options) (map[string]report.TensorReport, report.RoleSummary) {
	t.Helper()
	o.Only = convert.KindDecode
	rep, err := convert.Run(context.Background(), plan(t, src, &o), t.TempDir()+"/out", convert.RunOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]report.TensorReport{}
	for _, r := range rep.Tensors {
		if r.Output == "decode" && r.Scheme == string(convert.SchemeInt4) {
			rows[r.Module] = r
		}
	}
	for _, s := range rep.Summary {
		if s.Output == "decode" && s.Role == string(rules.RoleRoutedExpert) {
			return rows, s
		}
	}
	t.Fatal("no routed experts in the decode summary")
	return nil, report.RoleSummary{}
}

// TestInt4EqualsConvert: every INT4 figure compare measures is the one pdq convert reports for
// the same module with that group size and method, bit for bit, on BF16 and FP8-block sources
// and on modules of several slabs.
func TestInt4EqualsConvert(t *testing.T) {
	for _, kind := range []string{"bf16", "fp8", "slabs"} {
		for _, method := range []quantize.Method{quantize.MethodMSE, quantize.MethodRTN} {
			if kind == "slabs" && method == quantize.MethodRTN {
				continue
			}
			src := source(t, kind)
			fs := formats(t, "int4-g32,int4-g128")
			res, err := compare.Run(context.Background(), plan(t, src, nil), compare.Options{Formats: fs, Method: method, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			sums := res.Summaries()
			for k, f := range fs {
				rows, sum := convertReport(t, src, convert.Options{GroupSize: f.Group, Method: method})
				// The table's statistics are the report summary's, to the bit.
				if o := sums[k].Overall; o.MeanSQNR != sum.MeanSQNR || o.MinSQNR != sum.MinSQNR || o.SQNR != sum.SQNR || o.Modules != sum.Tensors {
					t.Errorf("%s %s %s: compare mean %v min %v pooled %v of %d, convert's summary %v %v %v of %d", kind, method, f.Name,
						o.MeanSQNR, o.MinSQNR, o.SQNR, o.Modules, sum.MeanSQNR, sum.MinSQNR, sum.SQNR, sum.Tensors)
				}
				if len(rows) != len(res.Modules) {
					t.Fatalf("%s %s: convert reports %d INT4 modules, compare measured %d", kind, f.Name, len(rows), len(res.Modules))
				}
				for _, m := range res.Modules {
					row, ok := rows[m.Name]
					if !ok {
						t.Fatalf("%s %s: %s not in convert's report", kind, f.Name, m.Name)
					}
					got := m.Metrics[k]
					if report.Float(got.SQNR()) != row.SQNR || report.Float(got.RMSE()) != row.RMSE || got.Clipped != row.Clipped ||
						got.MaxAbsIdx != row.MaxAbsIndex || got.N != row.Elements {
						t.Errorf("%s %s %s %s: compare SQNR %v RMSE %v clipped %d, convert %v %v %d",
							kind, method, f.Name, m.Name, got.SQNR(), got.RMSE(), got.Clipped, row.SQNR, row.RMSE, row.Clipped)
					}
				}
			}
		}
	}
}

// TestFP4EqualsQuantizeFP4: the NVFP4 and MXFP4 figures are those of quantize.QuantizeFP4 on
// the whole tensor (NVFP4 under the global scale of the expert's gate and up together) measured
// with Metrics.AddFP4, and the modules span several slabs.
func TestFP4EqualsQuantizeFP4(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"fp8", "slabs"} {
		src := source(t, kind)
		p := plan(t, src, nil)
		fs := formats(t, "nvfp4,mxfp4")
		res, err := compare.Run(ctx, p, compare.Options{Formats: fs, Workers: 3, Sample: 1})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*convert.Module{}
		for _, m := range compare.Targets(p) {
			byName[m.Name] = m
		}
		whole := func(name string) []float32 {
			m := byName[name]
			v := make([]float32, m.Rows*m.Cols)
			if _, err := p.NewSourceReader().Decode(v, m, convert.Rows{R0: 0, R1: m.Rows}); err != nil {
				t.Fatal(err)
			}
			return v
		}
		for _, m := range res.Modules {
			w := whole(m.Name)
			sibling := ""
			for a, b := range map[string]string{"gate_proj": "up_proj", "up_proj": "gate_proj"} {
				if m.Projection == a {
					sibling = strings.TrimSuffix(m.Name, a) + b
				}
			}
			global, err := quantize.NVFP4Global(w)
			if sibling != "" {
				global, err = quantize.NVFP4Global(w, whole(sibling))
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Global != global {
				t.Errorf("%s: global scale %v, want %v (gate and up together)", m.Name, m.Global, global)
			}
			for k, f := range fs {
				opt := quantize.FP4Options{Format: quantize.PackedMXFP4}
				if f.Decode == convert.DecodeNVFP4 {
					opt = quantize.FP4Options{Format: quantize.PackedNVFP4, Global: global}
				}
				q, err := quantize.QuantizeFP4(ctx, w, m.Rows, m.Cols, opt)
				if err != nil {
					t.Fatal(err)
				}
				var want quantize.Metrics
				if err := want.AddFP4(w, q, 0); err != nil {
					t.Fatal(err)
				}
				got := m.Metrics[k]
				if got.N != want.N || got.Clipped != q.Clipped || got.MaxAbsIdx != want.MaxAbsIdx ||
					math.Abs(got.SQNR()-want.SQNR()) > 1e-9 || math.Abs(got.SumSqErr-want.SumSqErr) > 1e-9*want.SumSqErr {
					t.Errorf("%s %s %s: SQNR %.12f (clipped %d), QuantizeFP4 on the whole tensor %.12f (%d)",
						kind, f.Name, m.Name, got.SQNR(), got.Clipped, want.SQNR(), q.Clipped)
				}
			}
		}
	}
}

// TestFP4EqualsConvert: compare's NVFP4 and MXFP4 figures are the ones pdq convert
// --decode-format reports, and so are its statistics (the report summary's).
func TestFP4EqualsConvert(t *testing.T) {
	for _, kind := range []string{"fp8", "slabs"} {
		src := source(t, kind)
		for _, df := range []convert.DecodeFormat{convert.DecodeNVFP4, convert.DecodeMXFP4} {
			testFP4EqualsConvert(t, kind, src, df)
		}
	}
}

func testFP4EqualsConvert(t *testing.T, kind, src string, df convert.DecodeFormat) {
	t.Helper()
	p := plan(t, src, &convert.Options{DecodeFormat: df, Only: convert.KindDecode})
	rep, err := convert.Run(context.Background(), p, t.TempDir()+"/out", convert.RunOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compare.Run(context.Background(), plan(t, src, nil), compare.Options{Formats: formats(t, string(df)), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]report.TensorReport{}
	for _, r := range rep.Tensors {
		if r.Output == "decode" && r.Scheme == string(p.TargetScheme()) {
			rows[r.Module] = r
		}
	}
	if len(rows) != len(res.Modules) {
		t.Fatalf("%s %s: convert reports %d modules, compare measured %d", kind, df, len(rows), len(res.Modules))
	}
	for _, m := range res.Modules {
		got := m.Metrics[0]
		if row, ok := rows[m.Name]; !ok || report.Float(got.SQNR()) != row.SQNR || got.Clipped != row.Clipped || got.MaxAbsIdx != row.MaxAbsIndex {
			t.Errorf("%s %s %s: compare SQNR %v clipped %d, convert %v %d (reported: %v)", kind, df, m.Name, got.SQNR(), got.Clipped, row.SQNR, row.Clipped, ok)
		}
	}
	for _, sum := range rep.Summary {
		if sum.Output != "decode" || sum.Role != string(rules.RoleRoutedExpert) {
			continue
		}
		if o := res.Summaries()[0].Overall; o.MeanSQNR != sum.MeanSQNR || o.MinSQNR != sum.MinSQNR || o.SQNR != sum.SQNR {
			t.Errorf("%s %s: compare mean %v min %v pooled %v, convert's summary %v %v %v", kind, df, o.MeanSQNR, o.MinSQNR, o.SQNR, sum.MeanSQNR, sum.MinSQNR, sum.SQNR)
		}
	}
}

// TestSameForEveryWorkerCount: the result does not depend on the workers.
func TestSameForEveryWorkerCount(t *testing.T) {
	p := plan(t, source(t, "bf16"), nil)
	var first *compare.Result
	for _, w := range []int{1, 2, 5} {
		res, err := compare.Run(context.Background(), p, compare.Options{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = res
		} else if !reflect.DeepEqual(res, first) || !reflect.DeepEqual(res.Summaries(), first.Summaries()) {
			t.Errorf("workers %d: a different result", w)
		}
	}
}

// TestSelection: --sample spreads its experts over the indices and --layers keeps its layers;
// the totals of a summary are its modules'.
func TestSelection(t *testing.T) {
	p := plan(t, source(t, "bf16"), nil)
	res, err := compare.Run(context.Background(), p, compare.Options{Sample: 3, Layers: map[int]bool{2: true}, Formats: formats(t, "int4")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Modules {
		got = append(got, m.Name)
	}
	var want []string
	for _, e := range []string{"0", "2", "5"} {
		for _, pr := range []string{"gate_proj", "up_proj", "down_proj"} {
			want = append(want, "model.layers.2.mlp.experts."+e+"."+pr)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("modules %v\nwant %v", got, want)
	}
	if res.Targets != 2*8*3 {
		t.Errorf("targets %d, want 48", res.Targets)
	}
	s := res.Summaries()[0]
	var sumSq, sumErr float64
	for _, m := range res.Modules {
		sumSq += m.Metrics[0].SumSqRef
		sumErr += m.Metrics[0].SumSqErr
	}
	if s.Overall.Modules != 9 || len(s.Layers) != 1 || len(s.Projections) != 3 || len(s.Cells) != 3 ||
		math.Abs(float64(s.Overall.SQNR)-10*math.Log10(sumSq/sumErr)) > 1e-9 {
		t.Errorf("summary %+v", s.Overall)
	}
	for _, c := range s.Cells {
		if c.SQNR < s.Worst.SQNR {
			t.Errorf("cell %+v is worse than the worst %+v", c, s.Worst)
		}
	}
	_, err = compare.Run(context.Background(), p, compare.Options{Layers: map[int]bool{0: true}})
	if !errors.Is(err, compare.ErrNoModules) {
		t.Errorf("layer 0 (dense): %v, want ErrNoModules", err)
	}
}

// TestDecodeTensorsEqualPlan: the decode checkpoint compare sizes for each format is the one the
// conversion plans with that format (and group size), tensor for tensor.
func TestDecodeTensorsEqualPlan(t *testing.T) {
	for _, kind := range []string{"bf16", "glm4"} {
		src := source(t, kind)
		// The non-target Linears as FP8 blocks: the sizes of the rest come from the plan too.
		base := plan(t, src, &convert.Options{GroupSize: convert.PerChannel, Only: convert.KindDecode, DecodeDense: convert.DenseFP8})
		for _, f := range compare.Formats {
			o := convert.Options{GroupSize: f.Group, Only: convert.KindDecode, DecodeDense: convert.DenseFP8}
			if f.Kind != compare.KindInt4 {
				o.GroupSize = 0
				o.DecodeFormat = f.Decode
			}
			ck, _ := safetensors.Open(src)
			cfg, _ := rules.LoadConfig(ck.Dir)
			want, err := convert.NewPlan(ck, cfg, o)
			ck.Close()
			if err != nil {
				t.Fatal(err)
			}
			got, err := compare.DecodeTensors(base, f)
			if err != nil {
				t.Fatal(err)
			}
			if w := serving.Tensors(want, serving.Decode); !reflect.DeepEqual(got, w) {
				t.Errorf("%s %s: compare's decode tensors differ from the plan's", kind, f.Name)
			}
			var n int64
			for _, ts := range got {
				n += ts.Bytes
			}
			if n != want.Output(convert.KindDecode).Bytes(want.Source)-headerBytes(want) {
				t.Errorf("%s %s: %d tensor bytes, plan %d", kind, f.Name, n, want.Output(convert.KindDecode).Bytes(want.Source)-headerBytes(want))
			}
		}
	}
}

// headerBytes is what a planned output's shard files hold besides tensor data.
func headerBytes(p *convert.Plan) int64 {
	var n int64
	for _, s := range p.Output(convert.KindDecode).Shards {
		n += int64(len(s.Layout.Prefix))
	}
	return n
}

// TestSizes: the bytes of each format follow its bits per weight, and with a serving setup the
// formats that store less leave more KV cache.
func TestSizes(t *testing.T) {
	src := source(t, "fp8")
	p := plan(t, src, nil)
	fs := formats(t, "int4-g32,int4-g128,nvfp4,mxfp4")
	res, err := compare.Run(context.Background(), p, compare.Options{Formats: fs, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := serving.ModelFromConfig(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	par := serving.Parallel{TP: 2, EP: 1}
	kv, err := m.KVBytesPerToken(serving.KVBF16, par)
	if err != nil {
		t.Fatal(err)
	}
	setup := &compare.Setup{Model: m, Parallel: par, Budget: serving.Budget{GPUMemory: 1 << 30, MemFraction: 0.5}, KV: kv}
	sums := res.Summaries()
	if err := compare.Sizes(p, sums, fs, setup); err != nil {
		t.Fatal(err)
	}
	var elems int64
	for _, tm := range compare.Targets(p) {
		elems += int64(tm.Rows * tm.Cols)
	}
	for i, s := range sums {
		f := fs[i]
		perModule := map[string]int64{"int4-g32": 16, "int4-g64": 16, "int4-g128": 16, "int4-channel": 16, "nvfp4": 4}[f.Name]
		want := int64(float64(elems)*s.BitsPerWeight/8) + perModule*int64(len(compare.Targets(p)))
		if s.TargetBytes != want {
			t.Errorf("%s: target bytes %d, want %d", f.Name, s.TargetBytes, want)
		}
		if s.Serving == nil || s.Serving.Tokens <= 0 {
			t.Fatalf("%s: no serving figures", f.Name)
		}
	}
	// g128 and MXFP4 store less than g32 and NVFP4: more tokens.
	if !(sums[1].Serving.Tokens > sums[0].Serving.Tokens && sums[3].Serving.Tokens > sums[2].Serving.Tokens) {
		t.Errorf("tokens %d %d %d %d: want g128 > g32 and mxfp4 > nvfp4", sums[0].Serving.Tokens, sums[1].Serving.Tokens, sums[2].Serving.Tokens, sums[3].Serving.Tokens)
	}
}

func TestParseFormats(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // names, or "" for an error
	}{
		{"int4-g32,int4-g128,nvfp4,mxfp4", "int4-g32 int4-g128 nvfp4 mxfp4"},
		{" NVFP4 , int4 ", "nvfp4 int4-g32"},
		{"int4-channel,", "int4-channel"},
		{"int4-g32,int4", ""},
		{"fp8", ""},
		{"", ""},
		{",,", ""},
		{"int4-g16", ""},
		{"nvfp4;mxfp4", ""},
	} {
		fs, err := compare.ParseFormats(c.in)
		var names []string
		for _, f := range fs {
			names = append(names, f.Name)
		}
		if c.want == "" {
			if !errors.Is(err, compare.ErrBadFormat) {
				t.Errorf("%q: %v %v, want ErrBadFormat", c.in, names, err)
			}
			continue
		}
		if err != nil || strings.Join(names, " ") != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, names, err, c.want)
		}
	}
}

func TestUnfit(t *testing.T) {
	for _, c := range []struct {
		format     string
		rows, cols int
		fits       bool
	}{
		{"int4-g32", 4, 64, true},
		{"int4-g32", 4, 48, false},
		{"int4-g128", 4, 64, false},
		{"int4-channel", 4, 12, false}, // packing: 8 per word
		{"int4-channel", 4, 24, true},
		{"nvfp4", 4, 16, true},
		{"nvfp4", 4, 24, false},
		{"mxfp4", 4, 48, false},
		{"mxfp4", 0, 32, false},
	} {
		f := formats(t, c.format)[0]
		if why := f.Unfit(c.rows, c.cols); (why == "") != c.fits {
			t.Errorf("%s %d×%d: unfit %q, want fits %v", c.format, c.rows, c.cols, why, c.fits)
		}
	}
}

// TestUnfitRefused: a format whose groups do not divide a target's in features is refused
// before anything is read, naming the format and the module; the formats that fit run.
func TestUnfitRefused(t *testing.T) {
	p := plan(t, source(t, "odd"), nil)
	_, err := compare.Run(context.Background(), p, compare.Options{Formats: formats(t, "int4-g32,int4-g128")})
	if !errors.Is(err, compare.ErrUnfit) || !strings.Contains(err.Error(), "int4-g128") || !strings.Contains(err.Error(), "down_proj") {
		t.Errorf("%v, want ErrUnfit naming int4-g128 and a down_proj", err)
	}
	if _, err := compare.Run(context.Background(), p, compare.Options{Formats: formats(t, "int4-g32,nvfp4,mxfp4"), Sample: 1}); err != nil {
		t.Errorf("formats that fit: %v", err)
	}
}

// TestOtherRoles: targets beyond the routed experts form groups of their own role, never mixed
// with the routed experts' projections of the same name.
func TestOtherRoles(t *testing.T) {
	o := convert.Options{GroupSize: convert.PerChannel, Only: convert.KindDecode, OnUnsupported: convert.UnsupportedSkip,
		Targets: `(\.experts\.\d+|shared_experts)\.gate_proj$|o_proj$`}
	res, err := compare.Run(context.Background(), plan(t, source(t, "glm4"), &o), compare.Options{Formats: formats(t, "int4")})
	if err != nil {
		t.Fatal(err)
	}
	var projs []string
	for _, f := range res.Summaries()[0].Projections {
		projs = append(projs, f.Projection)
	}
	want := []string{"attention:o_proj", "gate_proj", "shared_experts:gate_proj"} // first appearance
	if !reflect.DeepEqual(projs, want) {
		t.Errorf("projections %v, want %v", projs, want)
	}
}

// TestCancel: a cancelled context stops the run with its error.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := compare.Run(ctx, plan(t, source(t, "bf16"), nil), compare.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
}

// TestNonFiniteRefused: a NaN in a source weight stops the run with ErrNonFinite naming the
// tensor and the element, with and without the NVFP4 pass that reads gate and up first.
func TestNonFiniteRefused(t *testing.T) {
	for _, c := range []struct{ tensor, formats string }{
		{"model.layers.1.mlp.experts.3.down_proj.weight", "int4-g32,mxfp4"},
		{"model.layers.2.mlp.experts.5.up_proj.weight", compare.DefaultFormats},
	} {
		src := filepath.Join(t.TempDir(), "src")
		if err := os.CopyFS(src, os.DirFS(source(t, "bf16"))); err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		var tensor *safetensors.Tensor
		for _, ts := range ck.Tensors() {
			if ts.Name == c.tensor {
				tensor = ts
			}
		}
		ck.Close()
		if tensor == nil {
			t.Fatalf("no %s", c.tensor)
		}
		f, err := os.OpenFile(tensor.Shard.Path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt([]byte{0xc0, 0x7f}, tensor.Offset()+2*5) // BF16 NaN at element 5
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, err = compare.Run(context.Background(), plan(t, src, nil), compare.Options{Formats: formats(t, c.formats), Workers: 2})
		if !errors.Is(err, quantize.ErrNonFinite) || !strings.Contains(err.Error(), strings.TrimSuffix(c.tensor, ".weight")) || !strings.Contains(err.Error(), "element 5 ") {
			t.Errorf("%s: %v, want ErrNonFinite naming the tensor and element 5", c.tensor, err)
		}
	}
}

// FuzzParseFormats: any list either parses into distinct known formats or is ErrBadFormat.
func FuzzParseFormats(f *testing.F) {
	for _, s := range []string{compare.DefaultFormats, "int4", " nvfp4 ,", "int4,int4-g32", "", "mxfp4;x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := compare.ParseFormats(s)
		if err != nil {
			if !errors.Is(err, compare.ErrBadFormat) {
				t.Fatalf("%q: %v is not ErrBadFormat", s, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, f := range fs {
			if seen[f.Name] || !strings.Contains(compare.Names(), f.Name) {
				t.Fatalf("%q: %v", s, fs)
			}
			seen[f.Name] = true
		}
	})
}
