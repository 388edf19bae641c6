package convert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/report"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// root holds the checkpoints and outputs shared by several tests of one test binary run.
var root string

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(m.Run()) // a child process that kills itself: it must leave nothing behind
	}
	var err error
	if root, err = os.MkdirTemp("", "convert-test-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

var (
	sharedMu   sync.Mutex
	sharedDirs = map[string]string{}
)

// shared returns root/key, made by make on first use; later calls (from any test) reuse it.
// Tests must not modify what it returns.
func shared(t testing.TB, key string, make func(dir string) error) string {
	t.Helper()
	if root == "" {
		t.Fatal("no shared directory in a child process")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if dir, ok := sharedDirs[key]; ok {
		return dir
	}
	dir := filepath.Join(root, key)
	if err := make(dir); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("%s: %v", key, err)
	}
	sharedDirs[key] = dir
	return dir
}

func generateInto(dir string, o synth.Options) error {
	if o.Workers == 0 {
		o.Workers = 2
	}
	return synth.Generate(context.Background(), dir, o)
}

// glm4F16Source is glm4Source's model stored as F16 (shared, read-only).
func glm4F16Source(t testing.TB) string {
	return shared(t, "glm4-f16", func(dir string) error {
		return generateInto(dir, synth.Options{Model: synth.Tiny(synth.StyleGLM4), Seed: 1, MaxShardBytes: 1 << 20, DType: safetensors.F16})
	})
}

// glm4Source is a dense BF16 GLM-4-style checkpoint of several shards (shared, read-only).
func glm4Source(t testing.TB) string {
	return shared(t, "glm4-bf16", func(dir string) error {
		return generateInto(dir, synth.Options{Model: synth.Tiny(synth.StyleGLM4), Seed: 1, MaxShardBytes: 1 << 20})
	})
}

// deepseekSource is an FP8-block DeepSeek-style checkpoint of several shards, with an MTP layer
// (eh_proj, shared_head.head) (shared, read-only).
func deepseekSource(t testing.TB) string {
	return shared(t, "deepseek-fp8", func(dir string) error {
		m := synth.Tiny(synth.StyleDeepSeek)
		m.MTPLayers = 1
		return generateInto(dir, synth.Options{Model: m, FP8: true, Seed: 2, MaxShardBytes: 1 << 20})
	})
}

// plan opens src and plans it the way pdq convert does.
func plan(t testing.TB, src string, o convert.Options) *convert.Plan {
	t.Helper()
	p, err := tryPlan(t, src, o)
	if err != nil {
		t.Fatalf("plan %s: %v", src, err)
	}
	return p
}

func tryPlan(t testing.TB, src string, o convert.Options) (*convert.Plan, error) {
	t.Helper()
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatalf("open %s: %v", src, err)
	}
	t.Cleanup(func() { ck.Close() })
	cfg, err := rules.LoadConfig(ck.Dir)
	if err != nil {
		t.Fatalf("config of %s: %v", src, err)
	}
	return convert.NewPlan(ck, cfg, o)
}

// convertTo plans src and runs the conversion into out.
func convertTo(t testing.TB, src, out string, o convert.Options, ro convert.RunOptions) *report.Report {
	t.Helper()
	rep, err := runPlan(plan(t, src, o), out, ro)
	if err != nil {
		t.Fatalf("convert %s: %v", src, err)
	}
	return rep
}

// readTree returns every regular file under dir by slash-separated relative path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return files
}

// outputFiles is what two equal conversions must agree on: every file under prefill/ and decode/,
// and report.json (the journal is bookkeeping).
func outputFiles(t testing.TB, out string) map[string][]byte {
	t.Helper()
	files := readTree(t, out)
	for k := range files {
		if k != "report.json" && !strings.HasPrefix(k, "prefill/") && !strings.HasPrefix(k, "decode/") {
			delete(files, k)
		}
	}
	return files
}

// sameFiles fails unless a and b hold the same paths with the same bytes.
func sameFiles(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	var names []string
	for k := range a {
		names = append(names, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	bad := 0
	for _, k := range names {
		x, okx := a[k]
		y, oky := b[k]
		switch {
		case !okx || !oky:
			t.Errorf("%s: %s only in one output (first: %v, second: %v)", what, k, okx, oky)
		case !bytes.Equal(x, y):
			t.Errorf("%s: %s differs (%d vs %d bytes)", what, k, len(x), len(y))
		default:
			continue
		}
		if bad++; bad == 10 {
			t.Fatalf("%s: too many differences", what)
		}
	}
	if len(a) == 0 {
		t.Errorf("%s: no files", what)
	}
}

// tensor is one tensor read back from a checkpoint.
type tensor struct {
	DType safetensors.DType
	Shape []int64
	Raw   []byte
	Shard string
}

// readTensors reads every tensor of the checkpoint in dir.
func readTensors(t testing.TB, dir string) map[string]*tensor {
	t.Helper()
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer ck.Close()
	out := map[string]*tensor{}
	for _, x := range ck.Tensors() {
		raw := make([]byte, x.ByteSize())
		if err := ck.ReadTensor(x, raw); err != nil {
			t.Fatalf("read %s: %v", x.Name, err)
		}
		out[x.Name] = &tensor{DType: x.DType, Shape: x.Shape, Raw: raw, Shard: x.Shard.Name}
	}
	return out
}

// floats decodes a float tensor to float32.
func (x *tensor) floats(t testing.TB) []float32 {
	t.Helper()
	n := int64(1)
	for _, d := range x.Shape {
		n *= d
	}
	v := make([]float32, n)
	if err := safetensors.DecodeFloat32(v, x.Raw, x.DType); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return v
}

// sameShape compares shapes.
func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// readJSON parses a JSON file into a map.
func readJSON(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// runPlan runs a plan into out.
func runPlan(p *convert.Plan, out string, ro convert.RunOptions) (*report.Report, error) {
	return convert.Run(context.Background(), p, out, ro)
}

// copyTree copies every file under src to dst (a checkpoint onto another file system) and
// returns dst.
func copyTree(t *testing.T, src, dst string) string {
	t.Helper()
	for name, b := range readTree(t, src) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
