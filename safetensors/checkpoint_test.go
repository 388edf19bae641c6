package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOpenRejectsNamesFile: the bad files of badHeaders, opened as a checkpoint, give errors that
// name the file and the tensor.
func TestOpenRejectsNamesFile(t *testing.T) {
	dir := t.TempDir()
	for i, c := range badHeaders {
		path := filepath.Join(dir, fmt.Sprintf("bad%02d.safetensors", i))
		if err := os.WriteFile(path, c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: Open error %q: want %q naming %s and %s", c.name, err, c.want, path, c.mention)
		}
	}
}

// u8Specs returns U8 tensors of the given sizes, named name0, name1, ...
func u8Specs(prefix string, sizes ...int64) []TensorSpec {
	var s []TensorSpec
	for i, n := range sizes {
		s = append(s, TensorSpec{fmt.Sprintf("%s%d", prefix, i), U8, []int64{n}})
	}
	return s
}

// fill returns data for specs: every byte of tensor k is k+1 mixed with its position.
func fill(specs []TensorSpec) map[string][]byte {
	m := map[string][]byte{}
	for k, s := range specs {
		size, _ := specBytes(s)
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(k+1) ^ byte(i*7)
		}
		m[s.Name] = b
	}
	return m
}

// writeCheckpoint writes a sharded checkpoint through PlanShards, Create and WriteIndex.
func writeCheckpoint(t *testing.T, dir string, specs []TensorSpec, maxShard int64, extra map[string]any) []ShardPlan {
	t.Helper()
	plans, err := PlanShards(specs, maxShard, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := fill(specs)
	for _, p := range plans {
		writeFile(t, dir, p.FileName, p.Specs, nil, data)
	}
	if err := WriteIndex(dir, plans, extra); err != nil {
		t.Fatal(err)
	}
	return plans
}

func TestPlanShards(t *testing.T) {
	cases := []struct {
		name  string
		sizes []int64
		cap   int64
		want  [][]int // tensor indexes per shard
	}{
		{"one shard", []int64{1, 2, 3}, 100, [][]int{{0, 1, 2}}},
		{"exact fill", []int64{4, 6, 10}, 10, [][]int{{0, 1}, {2}}},
		{"greedy in order", []int64{6, 6, 3, 1, 9}, 10, [][]int{{0}, {1, 2, 3}, {4}}},
		{"oversized tensor alone", []int64{3, 25, 3}, 10, [][]int{{0}, {1}, {2}}},
		{"oversized first", []int64{25, 3}, 10, [][]int{{0}, {1}}},
		{"zero-size tensors", []int64{10, 0, 0, 1}, 10, [][]int{{0, 1, 2}, {3}}},
	}
	for _, c := range cases {
		specs := u8Specs("t", c.sizes...)
		plans, err := PlanShards(specs, c.cap, map[string]string{"k": "v"})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(plans) != len(c.want) {
			t.Fatalf("%s: %d shards, want %d", c.name, len(plans), len(c.want))
		}
		for i, p := range plans {
			if want := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(c.want)); p.FileName != want {
				t.Errorf("%s: shard %d named %s, want %s", c.name, i, p.FileName, want)
			}
			var got []int
			for _, s := range p.Specs {
				var k int
				fmt.Sscanf(s.Name, "t%d", &k)
				got = append(got, k)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want[i]) {
				t.Errorf("%s: shard %d holds %v, want %v", c.name, i, got, c.want[i])
			}
			if p.Layout == nil || len(p.Layout.Tensors) != len(p.Specs) {
				t.Fatalf("%s: shard %d has no matching layout", c.name, i)
			}
			h, err := parseBytes(append(bytes.Clone(p.Layout.Prefix), make([]byte, p.Layout.FileSize-p.Layout.DataStart())...))
			if err != nil || h.Metadata["k"] != "v" || h.Metadata["format"] != "pt" {
				t.Errorf("%s: shard %d header: %v %v", c.name, i, err, h)
			}
		}
	}
	if _, err := PlanShards(u8Specs("t", 1), 0, nil); err == nil {
		t.Error("cap 0 accepted")
	}
	if _, err := PlanShards(nil, 10, nil); !errors.Is(err, ErrNoTensors) {
		t.Errorf("no specs: %v", err)
	}
	dup := append(u8Specs("t", 8), u8Specs("t", 8)...)
	if _, err := PlanShards(dup, 10, nil); !errors.Is(err, ErrDuplicateTensor) {
		t.Errorf("duplicate across shards: %v", err)
	}
	if _, err := PlanShards([]TensorSpec{{"a", U8, []int64{-1}}}, 10, nil); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("negative dimension: %v", err)
	}
}

// TestWriteIndexOpenRoundTrip: a sharded checkpoint written by this package opens with every
// tensor in place, in order, with its data, and the index is byte-exact.
func TestWriteIndexOpenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	specs := append(u8Specs("layer.", 6, 6, 3, 1, 9, 0, 25), TensorSpec{"scalar", F32, nil})
	writeCheckpoint(t, dir, specs, 10, map[string]any{"total_size": 1, "note": "a<b"})
	idx, err := os.ReadFile(filepath.Join(dir, IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := `{
  "metadata": {
    "note": "a<b",
    "total_size": 54
  },
  "weight_map": {
    "layer.0": "model-00001-of-00005.safetensors",
    "layer.1": "model-00002-of-00005.safetensors",
    "layer.2": "model-00002-of-00005.safetensors",
    "layer.3": "model-00002-of-00005.safetensors",
    "layer.4": "model-00003-of-00005.safetensors",
    "layer.5": "model-00003-of-00005.safetensors",
    "layer.6": "model-00004-of-00005.safetensors",
    "scalar": "model-00005-of-00005.safetensors"
  }
}
`
	if string(idx) != wantIdx {
		t.Errorf("index\n%s\nwant\n%s", idx, wantIdx)
	}
	for _, path := range []string{dir, filepath.Join(dir, IndexFileName)} {
		c, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.Dir != dir || c.IndexPath != filepath.Join(dir, IndexFileName) || len(c.Shards) != 5 {
			t.Errorf("Open(%s): dir %s index %s, %d shards", path, c.Dir, c.IndexPath, len(c.Shards))
		}
		if ts := fmt.Sprint(c.IndexMetadata["total_size"]); ts != "54" || c.DataBytes() != 54 {
			t.Errorf("total_size %s, DataBytes %d, want 54", ts, c.DataBytes())
		}
		var names []string
		for _, tn := range c.Tensors() {
			names = append(names, tn.Name)
		}
		if got := strings.Join(names, " "); got != "layer.0 layer.1 layer.2 layer.3 layer.4 layer.5 layer.6 scalar" {
			t.Errorf("tensor order %s", got)
		}
		data := fill(specs)
		for _, tn := range c.Tensors() {
			got := make([]byte, tn.ByteSize())
			if err := c.ReadTensor(tn, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[tn.Name]) {
				t.Errorf("tensor %s: data differs", tn.Name)
			}
		}
		if c.Tensor("nope") != nil {
			t.Error("Tensor of a missing name is not nil")
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".*")); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}

func TestOpenDirectoryWithoutIndex(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.safetensors", u8Specs("b", 2), nil, fill(u8Specs("b", 2)))
	writeFile(t, dir, "a.safetensors", u8Specs("a", 3, 1), nil, fill(u8Specs("a", 3, 1)))
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub.safetensors"), 0o755)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Shards) != 2 || c.Shards[0].Name != "a.safetensors" || c.Shards[1].Name != "b.safetensors" || c.IndexPath != "" {
		t.Fatalf("shards %+v index %q", c.Shards, c.IndexPath)
	}
	var names []string
	for _, tn := range c.Tensors() {
		names = append(names, tn.Name)
	}
	if strings.Join(names, ",") != "a0,a1,b0" || c.DataBytes() != 6 {
		t.Errorf("tensors %v, %d bytes", names, c.DataBytes())
	}
	if tn := c.Tensor("b0"); tn.Offset() != c.Shards[1].Header.DataStart || tn.Shard != c.Shards[1] {
		t.Errorf("b0 at %d in %s", tn.Offset(), tn.Shard.Name)
	}
	s := c.Shards[0]
	if st, _ := os.Stat(s.Path); s.Size != st.Size() || !s.ModTime.Equal(st.ModTime()) || s.Path != filepath.Join(dir, s.Name) {
		t.Errorf("shard %+v", s)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNoTensors) {
		t.Errorf("empty directory: %v", err)
	}
	dup := t.TempDir()
	writeFile(t, dup, "x.safetensors", u8Specs("a", 3), nil, fill(u8Specs("a", 3)))
	writeFile(t, dup, "y.safetensors", u8Specs("a", 3), nil, fill(u8Specs("a", 3)))
	if _, err := Open(dup); !errors.Is(err, ErrDuplicateTensor) || !strings.Contains(err.Error(), `"a0"`) {
		t.Errorf("tensor in two files: %v", err)
	}
}

// TestOpenIndexProblems: each broken index or shard set fails with its sentinel, naming the
// tensor concerned.
func TestOpenIndexProblems(t *testing.T) {
	base := t.TempDir()
	// Two shards: s1 holds a0 a1, s2 holds b0.
	writeFile(t, base, "s1.safetensors", u8Specs("a", 2, 2), nil, fill(u8Specs("a", 2, 2)))
	writeFile(t, base, "s2.safetensors", u8Specs("b", 2), nil, fill(u8Specs("b", 2)))
	writeFile(t, base, "s3.safetensors", u8Specs("a", 2), nil, fill(u8Specs("a", 2)))
	good := `"a0": "s1.safetensors", "a1": "s1.safetensors", "b0": "s2.safetensors"`
	cases := []struct {
		name, index string
		want        error
		mention     string
	}{
		{"good", `{"metadata": {"total_size": 6}, "weight_map": {` + good + `}}`, nil, ""},
		{"no metadata", `{"weight_map": {` + good + `}, "other": [1, {"x": 2}]}`, nil, ""},
		{"parent directory", `{"weight_map": {` + good + `, "x": "../x.safetensors"}}`, ErrHostilePath, `"x"`},
		{"absolute path", `{"weight_map": {"a0": "/etc/s1.safetensors"}}`, ErrHostilePath, `"a0"`},
		{"subdirectory", `{"weight_map": {"a0": "sub/s1.safetensors"}}`, ErrHostilePath, `"a0"`},
		{"backslash", `{"weight_map": {"a0": "..\\s1.safetensors"}}`, ErrHostilePath, `"a0"`},
		{"dot dot", `{"weight_map": {"a0": ".."}}`, ErrHostilePath, `"a0"`},
		{"empty name", `{"weight_map": {"a0": ""}}`, ErrHostilePath, `"a0"`},
		{"missing shard", `{"weight_map": {` + good + `, "c": "gone.safetensors"}}`, ErrMissingShard, `"c": missing shard: ` + "DIR/gone.safetensors"},
		{"in the index, not in its shard", `{"weight_map": {` + good + `, "c0": "s2.safetensors"}}`, ErrIndexMismatch, `"c0"`},
		{"in the index under the wrong shard", `{"weight_map": {"a0": "s1.safetensors", "a1": "s2.safetensors", "b0": "s2.safetensors"}}`, ErrIndexMismatch, `"a1"`},
		{"in a shard, not in the index", `{"weight_map": {"a0": "s1.safetensors", "b0": "s2.safetensors"}}`, ErrIndexMismatch, `"a1"`},
		{"in two shards", `{"weight_map": {` + good + `, "a0": "s3.safetensors"}}`, ErrInvalidIndex, `"a0"`},
		{"shards overlap", `{"weight_map": {"a0": "s3.safetensors", "a1": "s1.safetensors", "b0": "s2.safetensors"}}`, ErrDuplicateTensor, `"a0"`},
		{"malformed JSON", `{"weight_map": {` + good, ErrInvalidIndex, ""},
		{"not an object", `[]`, ErrInvalidIndex, ""},
		{"no weight_map", `{"metadata": {}}`, ErrInvalidIndex, ""},
		{"weight_map twice", `{"weight_map": {}, "weight_map": {}}`, ErrInvalidIndex, ""},
		{"weight_map not an object", `{"weight_map": ["s1.safetensors"]}`, ErrInvalidIndex, ""},
		{"shard not a string", `{"weight_map": {"a0": 1}}`, ErrInvalidIndex, `"a0"`},
		{"metadata not an object", `{"metadata": 3, "weight_map": {` + good + `}}`, ErrInvalidIndex, ""},
		{"trailing data", `{"weight_map": {` + good + `}} {}`, ErrInvalidIndex, ""},
		{"empty weight_map", `{"weight_map": {}}`, ErrNoTensors, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, s := range []string{"s1", "s2", "s3"} {
				if err := os.Link(filepath.Join(base, s+".safetensors"), filepath.Join(dir, s+".safetensors")); err != nil {
					t.Fatal(err)
				}
			}
			ix := filepath.Join(dir, IndexFileName)
			if err := os.WriteFile(ix, []byte(c.index), 0o644); err != nil {
				t.Fatal(err)
			}
			ck, err := Open(dir)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(ck.Shards) != 2 || len(ck.Tensors()) != 3 {
					t.Errorf("%d shards, %d tensors", len(ck.Shards), len(ck.Tensors()))
				}
				ck.Close()
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if mention := strings.ReplaceAll(c.mention, "DIR", dir); !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), mention) {
				t.Errorf("error %q does not name the file and %s", err, c.mention)
			}
		})
	}
}

func TestReadTensorAtAndReader(t *testing.T) {
	dir := t.TempDir()
	specs := u8Specs("t", 100, 0, 7)
	data := fill(specs)
	path := writeFile(t, dir, "r.safetensors", specs, nil, data)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0, t1 := c.Tensor("t0"), c.Tensor("t1")
	part := make([]byte, 30)
	if err := c.ReadTensorAt(t0, part, 50); err != nil || !bytes.Equal(part, data["t0"][50:80]) {
		t.Errorf("ReadTensorAt(50): %v", err)
	}
	if err := c.ReadTensorAt(t0, make([]byte, 10), 90); err != nil {
		t.Errorf("read up to the end: %v", err)
	}
	if err := c.ReadTensor(t1, nil); err != nil {
		t.Errorf("zero-size tensor: %v", err)
	}
	for _, bad := range []struct {
		n   int
		off int64
	}{{11, 90}, {1, 100}, {1, -1}, {101, 0}, {1, 1 << 62}} {
		if err := c.ReadTensorAt(t0, make([]byte, bad.n), bad.off); !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), `"t0"`) {
			t.Errorf("ReadTensorAt(%d bytes at %d): %v", bad.n, bad.off, err)
		}
	}
	if err := c.ReadTensor(t0, make([]byte, 99)); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ReadTensor with a short buffer: %v", err)
	}
	r, err := c.TensorReader(t0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(all, data["t0"]) {
		t.Errorf("TensorReader: %v, %d bytes", err, len(all))
	}
	// Concurrent reads of every tensor.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, tn := range c.Tensors() {
				b := make([]byte, tn.ByteSize())
				if err := c.ReadTensor(tn, b); err != nil || !bytes.Equal(b, data[tn.Name]) {
					t.Errorf("concurrent read of %s: %v", tn.Name, err)
				}
			}
		}()
	}
	wg.Wait()
	// A tensor of another checkpoint is refused.
	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := c.ReadTensor(other.Tensor("t2"), make([]byte, 7)); err == nil {
		t.Error("read of another checkpoint's tensor accepted")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadTensor(t0, make([]byte, 100)); !errors.Is(err, ErrClosed) {
		t.Errorf("read after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReadDetectsChangedShard(t *testing.T) {
	dir := t.TempDir()
	specs := u8Specs("t", 4)
	path := writeFile(t, dir, "c.safetensors", specs, nil, fill(specs))
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadTensor(c.Tensor("t0"), make([]byte, 4)); !errors.Is(err, ErrShardChanged) || !strings.Contains(err.Error(), path) {
		t.Errorf("read of a changed shard: %v", err)
	}
}

func TestWriteIndexRejects(t *testing.T) {
	plans, err := PlanShards(u8Specs("t", 1, 1), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := append([]ShardPlan{}, plans...)
	bad[1].FileName = "../x.safetensors"
	if err := WriteIndex(dir, bad, nil); !errors.Is(err, ErrHostilePath) {
		t.Errorf("hostile shard name: %v", err)
	}
	dup := []ShardPlan{plans[0], {FileName: "other.safetensors", Specs: plans[0].Specs}}
	if err := WriteIndex(dir, dup, nil); !errors.Is(err, ErrDuplicateTensor) {
		t.Errorf("tensor in two shards: %v", err)
	}
	if err := WriteIndex(dir, plans, map[string]any{"f": func() {}}); err == nil {
		t.Error("unencodable extra metadata accepted")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed WriteIndex left %d files", len(ents))
	}
}
