package safetensors

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"pdq/internal/fsutil"
)

// writeFile writes specs with data through Create/WriteTensor/Close and returns the path.
func writeFile(t *testing.T, dir, name string, specs []TensorSpec, md map[string]string, data map[string][]byte) string {
	t.Helper()
	l, err := ComputeLayout(specs, md)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	w, err := Create(path, l)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, s := range specs {
		if err := w.WriteTensor(s.Name, data[s.Name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGoldenFile: a small file, byte for byte. The expected header is written out by hand.
func TestGoldenFile(t *testing.T) {
	specs := []TensorSpec{{"w", F32, []int64{2}}, {"b", U8, []int64{3}}}
	data := map[string][]byte{
		"w": {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40}, // 1.0, 2.0
		"b": {1, 2, 3},
	}
	path := writeFile(t, t.TempDir(), "golden.safetensors", specs, map[string]string{"note": "a<b"}, data)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "\x98\x00\x00\x00\x00\x00\x00\x00" + // 152 = 151 bytes of JSON + 1 space
		`{"__metadata__":{"format":"pt","note":"a<b"},` +
		`"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}} ` +
		"\x00\x00\x80\x3f\x00\x00\x00\x40" + "\x01\x02\x03"
	if string(got) != want {
		t.Fatalf("file bytes\n got %q\nwant %q", got, want)
	}
}

func TestComputeLayout(t *testing.T) {
	specs := []TensorSpec{{"a", BF16, []int64{3, 5}}, {"s", F32, []int64{}}, {"z", I32, []int64{4, 0}}, {"f4", F4, []int64{2}}}
	l, err := ComputeLayout(specs, map[string]string{"format": "custom", "k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets := [][2]int64{{0, 30}, {30, 34}, {34, 34}, {34, 35}}
	for i, ti := range l.Tensors {
		if ti.Name != specs[i].Name || ti.DataOffsets != wantOffsets[i] {
			t.Errorf("tensor %d: %+v, want %s at %v", i, ti, specs[i].Name, wantOffsets[i])
		}
	}
	if len(l.Prefix)%8 != 0 || l.FileSize != int64(len(l.Prefix))+35 || l.DataStart() != int64(len(l.Prefix)) {
		t.Errorf("prefix %d bytes, file size %d", len(l.Prefix), l.FileSize)
	}
	if abs, size, ok := l.Offset("s"); !ok || abs != l.DataStart()+30 || size != 4 {
		t.Errorf("Offset(s) = %d, %d, %v", abs, size, ok)
	}
	if _, _, ok := l.Offset("missing"); ok {
		t.Error("Offset of a missing tensor reported ok")
	}
	h, err := parseBytes(append(slices.Clone(l.Prefix), make([]byte, 35)...))
	if err != nil {
		t.Fatal(err)
	}
	if h.Metadata["format"] != "custom" || h.Metadata["k"] != "v" || len(h.Metadata) != 2 {
		t.Errorf("metadata %v: the caller's format must be kept", h.Metadata)
	}
	l2, _ := ComputeLayout(specs, map[string]string{"k": "v", "format": "custom"})
	if !bytes.Equal(l.Prefix, l2.Prefix) {
		t.Error("same specs and metadata gave different bytes")
	}
	// Names needing escapes survive the trip.
	odd := []TensorSpec{{"q\"\\\n\t\x01\u2028é<>&", U8, []int64{1}}}
	l3, err := ComputeLayout(odd, nil)
	if err != nil {
		t.Fatal(err)
	}
	h3, err := parseBytes(append(slices.Clone(l3.Prefix), 0))
	if err != nil || h3.Tensors[0].Name != odd[0].Name || h3.Metadata["format"] != "pt" {
		t.Fatalf("escaped name: %v %+v", err, h3)
	}
}

func TestComputeLayoutRejects(t *testing.T) {
	cases := []struct {
		name  string
		specs []TensorSpec
		md    map[string]string
		want  error
	}{
		{"empty name", []TensorSpec{{"", U8, nil}}, nil, ErrInvalidSpec},
		{"reserved name", []TensorSpec{{"__metadata__", U8, nil}}, nil, ErrInvalidSpec},
		{"invalid UTF-8 name", []TensorSpec{{"a\xff", U8, nil}}, nil, ErrInvalidSpec},
		{"negative dimension", []TensorSpec{{"a", U8, []int64{2, -1}}}, nil, ErrInvalidSpec},
		{"unknown dtype", []TensorSpec{{"a", "F128", []int64{1}}}, nil, ErrUnknownDType},
		{"half a byte", []TensorSpec{{"a", F4, []int64{3}}}, nil, ErrMisaligned},
		{"overflow", []TensorSpec{{"a", F64, []int64{1 << 62}}}, nil, ErrOverflow},
		{"buffer overflow", []TensorSpec{{"a", U8, []int64{1 << 62}}, {"b", U8, []int64{1 << 62}}}, nil, ErrOverflow},
		{"duplicate", []TensorSpec{{"a", U8, nil}, {"a", U8, nil}}, nil, ErrDuplicateTensor},
		{"bad metadata", nil, map[string]string{"k": "\xff"}, ErrInvalidMetadata},
	}
	for _, c := range cases {
		if _, err := ComputeLayout(c.specs, c.md); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
}

// TestRoundTripFloats: every float dtype written, reopened, read and decoded gives the values
// rounded to that dtype.
func TestRoundTripFloats(t *testing.T) {
	src := []float32{0, 1, -2.5, 0.1, 448, -3e-5, 1e-3, 65504, float32(math.Inf(-1))}
	dtypes := []DType{F32, F64, F16, BF16, F8E4M3, F8E5M2}
	var specs []TensorSpec
	data := map[string][]byte{}
	for _, dt := range dtypes {
		name := "t." + string(dt)
		specs = append(specs, TensorSpec{name, dt, []int64{3, 3}})
		buf := make([]byte, len(src)*dt.Bits()/8)
		if err := EncodeFloat32(buf, src, dt); err != nil {
			t.Fatal(err)
		}
		data[name] = buf
	}
	path := writeFile(t, t.TempDir(), "floats.safetensors", specs, nil, data)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, dt := range dtypes {
		tn := c.Tensor("t." + string(dt))
		if tn == nil || tn.DType != dt || !slices.Equal(tn.Shape, []int64{3, 3}) {
			t.Fatalf("%s: tensor %+v", dt, tn)
		}
		raw := make([]byte, tn.ByteSize())
		if err := c.ReadTensor(tn, raw); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, tn.NumElements())
		if err := DecodeFloat32(got, raw, dt); err != nil {
			t.Fatal(err)
		}
		for i, f := range src {
			one := make([]byte, dt.Bits()/8)
			EncodeFloat32(one, []float32{f}, dt)
			want := make([]float32, 1)
			DecodeFloat32(want, one, dt)
			if math.Float32bits(got[i]) != math.Float32bits(want[0]) {
				t.Errorf("%s element %d: %v -> %v, want %v", dt, i, f, got[i], want[0])
			}
		}
		if dt == F32 && got[3] != 0.1 {
			t.Errorf("F32 changed 0.1 to %v", got[3])
		}
	}
}

// chunkWriter returns a writer for one U8 tensor "t" of n bytes and one of 0 bytes "e".
func chunkWriter(t *testing.T, n int64) (*Writer, string) {
	t.Helper()
	l, err := ComputeLayout([]TensorSpec{{"t", U8, []int64{n}}, {"e", U8, []int64{0}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "chunks.safetensors")
	w, err := Create(path, l)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.TempPath()), ".") || filepath.Dir(w.TempPath()) != filepath.Dir(path) {
		t.Errorf("temp path %s is not a hidden file next to %s", w.TempPath(), path)
	}
	return w, path
}

// TestWriteTensorAtCoverage: chunks in any order make a complete file; a missing range, a double
// write, an out-of-range write, an unknown name or a wrong size fail with ErrWriteMismatch, and
// then Close fails too and leaves nothing behind.
func TestWriteTensorAtCoverage(t *testing.T) {
	type chunk struct {
		name string
		off  int64
		n    int
	}
	cases := []struct {
		name     string
		chunks   []chunk
		writeErr bool // the last chunk fails
		closeErr bool
	}{
		{"complete, out of order", []chunk{{"t", 6, 4}, {"t", 0, 3}, {"t", 3, 3}, {"e", 0, 0}}, false, false},
		{"complete, zero-size tensor never written", []chunk{{"t", 0, 10}}, false, false},
		{"missing range", []chunk{{"t", 0, 3}, {"t", 6, 4}}, false, true},
		{"nothing written", nil, false, true},
		{"double write", []chunk{{"t", 0, 10}, {"t", 4, 2}}, true, true},
		{"overlap on the left", []chunk{{"t", 4, 4}, {"t", 2, 3}}, true, true},
		{"overlap on the right", []chunk{{"t", 4, 4}, {"t", 7, 3}}, true, true},
		{"covering write", []chunk{{"t", 4, 2}, {"t", 0, 10}}, true, true},
		{"past the end", []chunk{{"t", 8, 3}}, true, true},
		{"negative offset", []chunk{{"t", -1, 2}}, true, true},
		{"into a zero-size tensor", []chunk{{"t", 0, 10}, {"e", 0, 1}}, true, true},
		{"unknown name", []chunk{{"t", 0, 10}, {"x", 0, 1}}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, path := chunkWriter(t, 10)
			for i, ch := range c.chunks {
				data := make([]byte, ch.n)
				for j := range data {
					data[j] = byte(ch.off) + byte(j)
				}
				err := w.WriteTensorAt(ch.name, ch.off, data)
				last := i == len(c.chunks)-1
				if c.writeErr && last {
					if !errors.Is(err, ErrWriteMismatch) || !strings.Contains(err.Error(), path) {
						t.Fatalf("chunk %+v: error %v, want ErrWriteMismatch naming %s", ch, err, path)
					}
				} else if err != nil {
					t.Fatalf("chunk %+v: %v", ch, err)
				}
			}
			err := w.Close()
			if !c.closeErr {
				if err != nil {
					t.Fatal(err)
				}
				c, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				got := make([]byte, 10)
				if err := c.ReadTensor(c.Tensor("t"), got); err != nil {
					t.Fatal(err)
				}
				if want := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !bytes.Equal(got, want) {
					t.Errorf("data %v, want %v", got, want)
				}
				return
			}
			if !errors.Is(err, ErrWriteMismatch) || !strings.Contains(err.Error(), `"t"`) && !strings.Contains(err.Error(), `"e"`) && !strings.Contains(err.Error(), `"x"`) {
				t.Fatalf("Close error %v, want ErrWriteMismatch naming the tensor", err)
			}
			for _, p := range []string{path, w.TempPath()} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists after a failed Close (%v)", p, err)
				}
			}
			if err := w.Abort(); err != nil {
				t.Errorf("Abort after a failed Close: %v", err)
			}
		})
	}
}

func TestWriteTensorWrongSize(t *testing.T) {
	w, path := chunkWriter(t, 10)
	if err := w.WriteTensor("t", make([]byte, 9)); !errors.Is(err, ErrWriteMismatch) {
		t.Fatalf("9 bytes for 10: %v", err)
	}
	if err := w.WriteTensor("t", make([]byte, 10)); !errors.Is(err, ErrWriteMismatch) {
		t.Fatalf("the first error is not kept: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrWriteMismatch) {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file at %s after failed writes", path)
	}
}

func TestWriterAbortAndReuse(t *testing.T) {
	w, path := chunkWriter(t, 4)
	if err := w.WriteTensorAt("t", 0, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.TempPath()); err != nil {
		t.Fatalf("temp file missing while writing: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, w.TempPath()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after Abort", p)
		}
	}
	if err := w.WriteTensorAt("t", 2, []byte{3, 4}); err == nil {
		t.Error("write after Abort accepted")
	}
	if err := w.Close(); err == nil {
		t.Error("Close after Abort succeeded")
	}
	// A finished writer: Abort is a no-op, a second Close an error, the file stays.
	w2, path2 := chunkWriter(t, 1)
	if err := w2.WriteTensor("t", []byte{7}); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Abort(); err != nil {
		t.Errorf("Abort after Close: %v", err)
	}
	if err := w2.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(path2); err != nil {
		t.Errorf("file gone after Abort following Close: %v", err)
	}
}

func TestCreateRejectsBadLayout(t *testing.T) {
	good, err := ComputeLayout([]TensorSpec{{"a", U8, []int64{4}}, {"b", U8, []int64{2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(l *Layout)) *Layout {
		l := *good
		l.Prefix = slices.Clone(good.Prefix)
		l.Tensors = slices.Clone(good.Tensors)
		l.index = nil
		f(&l)
		return &l
	}
	cases := map[string]*Layout{
		"nil":                 nil,
		"short prefix":        mod(func(l *Layout) { l.Prefix = l.Prefix[:4] }),
		"unpadded prefix":     mod(func(l *Layout) { l.Prefix = l.Prefix[:len(l.Prefix)-1] }),
		"wrong file size":     mod(func(l *Layout) { l.FileSize++ }),
		"tensor offsets":      mod(func(l *Layout) { l.Tensors[1].DataOffsets = [2]int64{3, 5} }),
		"missing tensor":      mod(func(l *Layout) { l.Tensors = l.Tensors[:1] }),
		"renamed tensor":      mod(func(l *Layout) { l.Tensors[0].Name = "c" }),
		"tensor listed twice": mod(func(l *Layout) { l.Tensors[1] = l.Tensors[0] }),
	}
	dir := t.TempDir()
	for name, l := range cases {
		path := filepath.Join(dir, "x.safetensors")
		if w, err := Create(path, l); !errors.Is(err, ErrWriteMismatch) {
			if w != nil {
				w.Abort()
			}
			t.Errorf("%s: Create error %v, want ErrWriteMismatch", name, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Create of bad layouts left %d files", len(ents))
	}
}

// TestConcurrentWriteTensorAt: goroutines write interleaved chunks of several tensors at once.
func TestConcurrentWriteTensorAt(t *testing.T) {
	const n, chunk, workers = 1 << 14, 100, 8
	specs := []TensorSpec{{"a", U8, []int64{n}}, {"b", I16, []int64{n / 2}}, {"c", F32, []int64{n / 4}}}
	l, err := ComputeLayout(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "conc.safetensors")
	w, err := Create(path, l)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*31 + i>>8)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := g; k*chunk < n; k += workers { // worker g writes chunks g, g+8, ...
				off := int64(k * chunk)
				end := min(off+chunk, n)
				for _, s := range specs {
					if err := w.WriteTensorAt(s.Name, off, want[off:end]); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range specs {
		got := make([]byte, n)
		if err := c.ReadTensor(c.Tensor(s.Name), got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("tensor %s differs", s.Name)
		}
	}
}

// TestWriterPlantedLink: a hard link planted under the writer's temporary name is replaced,
// not written through.
func TestWriterPlantedLink(t *testing.T) {
	dir := t.TempDir()
	plans, err := PlanShards([]TensorSpec{{Name: "x", DType: U8, Shape: []int64{4}}}, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, plans[0].FileName)
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, filepath.Join(dir, "."+plans[0].FileName+".partial")); err != nil {
		t.Fatal(err)
	}
	w, err := Create(path, plans[0].Layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor("x", []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatalf("the planted link's target was written: %q", b)
	}
}

// TestWriterResume: a detached writer's temporary file is resumed with the kept tensors counted
// written; a file with another link, another size or another header is refused (ErrNoPartial).
func TestWriterResume(t *testing.T) {
	dir := t.TempDir()
	plans, err := PlanShards([]TensorSpec{{Name: "a", DType: U8, Shape: []int64{4}}, {Name: "b", DType: U8, Shape: []int64{4}}}, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, plans[0].FileName)
	w, err := Create(path, plans[0].Layout)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteTensor("a", []byte{1, 2, 3, 4})
	if err := w.Detach(); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, "."+plans[0].FileName+".partial")
	if err := os.Link(temp, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	if _, err := Resume(path, plans[0].Layout, map[string]uint32{"a": crcOf([]byte{1, 2, 3, 4})}); !errors.Is(err, ErrNoPartial) {
		t.Fatalf("resume of a file with two links: %v", err)
	}
	os.Remove(filepath.Join(dir, "other"))
	w, err = Resume(path, plans[0].Layout, map[string]uint32{"a": crcOf([]byte{1, 2, 3, 4})})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor("a", []byte{9, 9, 9, 9}); !errors.Is(err, ErrWriteMismatch) {
		t.Fatalf("rewriting a kept tensor: %v, want ErrWriteMismatch", err)
	}
	w.Abort()
	w, _ = Create(path, plans[0].Layout)
	w.WriteTensor("a", []byte{1, 2, 3, 4})
	w.Detach()
	w, err = Resume(path, plans[0].Layout, map[string]uint32{"a": crcOf([]byte{1, 2, 3, 4})})
	if err != nil {
		t.Fatal(err)
	}
	w.WriteTensor("b", []byte{5, 6, 7, 8})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, want, _ := fsutil.CRCFile(context.Background(), path); w.CRC32C() != want {
		t.Fatalf("resumed writer's checksum %08x, file's %08x", w.CRC32C(), want)
	}
	ck, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	got := make([]byte, 4)
	ck.ReadTensor(ck.Tensor("a"), got)
	if string(got) != "\x01\x02\x03\x04" {
		t.Fatalf("kept tensor a reads %v", got)
	}
	os.WriteFile(temp, make([]byte, plans[0].Layout.FileSize), 0o644) // right size, no header
	if _, err := Resume(path, plans[0].Layout, nil); !errors.Is(err, ErrNoPartial) {
		t.Fatalf("resume of a file without the header: %v", err)
	}
}

func crcOf(b []byte) uint32 { return fsutil.UpdateCRC32C(0, b) }

// TestWriterChecksums: the checksums a writer takes as bytes pass (per tensor, and of the whole
// file at Close) equal those of the file read back, whatever the order and size of the writes.
func TestWriterChecksums(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	specs := []TensorSpec{
		{Name: "a", DType: F32, Shape: []int64{37, 11}},
		{Name: "empty", DType: BF16, Shape: []int64{0, 4}},
		{Name: "b", DType: U8, Shape: []int64{1000}},
		{Name: "c", DType: BF16, Shape: []int64{3}},
	}
	for trial := range 20 {
		dir := t.TempDir()
		plans, err := PlanShards(specs, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := plans[0].Layout
		path := filepath.Join(dir, plans[0].FileName)
		w, err := Create(path, l)
		if err != nil {
			t.Fatal(err)
		}
		type piece struct {
			name string
			off  int64
			data []byte
		}
		var pieces []piece
		want := map[string][]byte{}
		for _, tn := range l.Tensors {
			data := make([]byte, tn.ByteSize())
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			want[tn.Name] = data
			for off := int64(0); off < int64(len(data)); {
				n := min(int64(1+rng.IntN(300)), int64(len(data))-off)
				pieces = append(pieces, piece{tn.Name, off, data[off : off+n]})
				off += n
			}
		}
		rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
		for _, p := range pieces {
			if err := w.WriteTensorAt(p.name, p.off, p.data); err != nil {
				t.Fatal(err)
			}
		}
		for name, data := range want {
			if got, ok := w.TensorCRC32C(name); !ok || got != crcOf(data) {
				t.Fatalf("trial %d: tensor %s checksum %08x (%v), want %08x", trial, name, got, ok, crcOf(data))
			}
		}
		if _, ok := w.TensorCRC32C("missing"); ok {
			t.Fatal("checksum of a tensor not in the layout")
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, sum, err := fsutil.CRCFile(context.Background(), path); err != nil || sum != w.CRC32C() {
			t.Fatalf("trial %d: writer's file checksum %08x, file read back %08x (%v)", trial, w.CRC32C(), sum, err)
		}
	}
	// a tensor written in part has no checksum yet
	plans, _ := PlanShards(specs, 1<<20, nil)
	w, err := Create(filepath.Join(t.TempDir(), plans[0].FileName), plans[0].Layout)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.WriteTensorAt("b", 0, make([]byte, 10))
	if _, ok := w.TensorCRC32C("b"); ok {
		t.Fatal("checksum of a tensor written in part")
	}
}
