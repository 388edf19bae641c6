package publish

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"pdq/internal/floatcodec"
	"pdq/publish/store"
)

// Test checkpoints: safetensors shards of synthetic weights (N(0, 0.02) BF16, block-scaled FP8
// e4m3, INT4 packed in I32), a config, an index and a file in a sub-directory.

func normals(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	return x
}

func bf16Bytes(n int, seed uint64) []byte {
	b := make([]byte, 2*n)
	for i, v := range normals(n, seed) {
		binary.LittleEndian.PutUint16(b[2*i:], floatcodec.Float32ToBF16(v))
	}
	return b
}

func fp8Bytes(n int, seed uint64) []byte {
	x := normals(n, seed)
	b := make([]byte, n)
	for o := 0; o < n; o += 16384 {
		blk := x[o:min(n, o+16384)]
		m := float32(0)
		for _, v := range blk {
			m = max(m, float32(math.Abs(float64(v))))
		}
		for i, v := range blk {
			b[o+i] = floatcodec.Float32ToF8E4M3(v * 448 / m)
		}
	}
	return b
}

func int4Bytes(nBytes int, seed uint64) []byte {
	x := normals(2*nBytes, seed)
	b := make([]byte, nBytes)
	for o := 0; o < len(x); o += 32 {
		g := x[o:min(len(x), o+32)]
		m := float32(0)
		for _, v := range g {
			m = max(m, float32(math.Abs(float64(v))))
		}
		for i, v := range g {
			q := max(-8, min(7, int(math.Round(float64(v*7/m)))))
			b[(o+i)/2] |= byte(q+8) << (4 * ((o + i) % 2))
		}
	}
	return b
}

type tensor struct {
	dtype string
	data  []byte
}

func safetensorsBytes(ts map[string]tensor) []byte {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	var data []byte
	for _, n := range names {
		t := ts[n]
		size := map[string]int{"BF16": 2, "I32": 4}[t.dtype]
		if size == 0 {
			size = 1
		}
		hdr[n] = map[string]any{"dtype": t.dtype, "shape": []int{len(t.data) / size}, "data_offsets": []int{len(data), len(data) + len(t.data)}}
		data = append(data, t.data...)
	}
	js, _ := json.Marshal(hdr)
	js = append(js, strings.Repeat(" ", (8-len(js)%8)%8)...)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(out, js...), data...)
}

// writeCheckpoint writes a small checkpoint; scale multiplies the tensor sizes (1: about 9 MiB,
// with one file over the 5 MiB minimum part size).
func writeCheckpoint(t testing.TB, dir string, scale int) {
	t.Helper()
	files := map[string][]byte{
		"model-00001-of-00002.safetensors": safetensorsBytes(map[string]tensor{
			"layers.0.mlp.weight": {"BF16", bf16Bytes(scale*3<<20, 1)},
			"layers.0.norm":       {"BF16", bf16Bytes(4096, 2)},
		}),
		"model-00002-of-00002.safetensors": safetensorsBytes(map[string]tensor{
			"layers.1.experts.0.weight":        {"F8_E4M3", fp8Bytes(scale*2<<20, 3)},
			"layers.1.experts.1.weight_packed": {"I32", int4Bytes(scale*1<<20, 4)},
		}),
		"config.json":                  []byte(`{"model_type": "test"}` + "\n"),
		"model.safetensors.index.json": []byte(`{"weight_map": {}}` + "\n"),
		"extra/notes.txt":              []byte("hello\n"),
		"empty.bin":                    nil,
	}
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTree fails unless dirs a and b hold the same files with the same bytes.
func sameTree(t testing.TB, a, b string) {
	t.Helper()
	read := func(dir string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			m[filepath.ToSlash(rel)], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := read(a), read(b)
	if len(ma) != len(mb) {
		t.Fatalf("%s has %d files, %s has %d", a, len(ma), b, len(mb))
	}
	for k, v := range ma {
		if w, ok := mb[k]; !ok || !bytes.Equal(v, w) {
			t.Fatalf("%s differs between %s and %s", k, a, b)
		}
	}
}

// hookStore wraps a store to inject failures.
type hookStore struct {
	store.Store
	mu         sync.Mutex
	failPut    map[string]int // key -> failures left
	hideStat   map[string]bool
	partsSent  int
	rangesRead int
}

var errInjected = errors.New("injected failure")

func (h *hookStore) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts store.PutOptions) error {
	h.mu.Lock()
	fail := h.failPut[key] > 0
	if fail {
		h.failPut[key]--
	}
	h.mu.Unlock()
	if fail {
		return errInjected
	}
	return h.Store.Put(ctx, key, r, size, opts)
}

func (h *hookStore) Stat(ctx context.Context, key string) (store.Info, error) {
	if h.hideStat[key] {
		return store.Info{}, store.ErrNotExist
	}
	return h.Store.Stat(ctx, key)
}

func (h *hookStore) UploadPart(ctx context.Context, key, id string, num int32, r io.ReadSeeker, size int64, crc uint32) (store.Part, error) {
	h.mu.Lock()
	h.partsSent++
	h.mu.Unlock()
	return h.Store.UploadPart(ctx, key, id, num, r, size, crc)
}

func quiet() Options {
	return Options{ToolVersion: "test", PartSize: store.MinPartSize, Parallel: 4, Log: discardLog}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// keyIn returns the object key that publishing dir gives the file at path (format 3: under the
// folder the files' identities name).
func keyIn(t testing.TB, dir, path string, compressed bool) string {
	t.Helper()
	files, err := listFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return ObjectKey(ManifestFormat, objectFolder(files), path, compressed)
}
