package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"unicode/utf8"
)

// formatErrors are the sentinels a malformed header may produce.
var formatErrors = []error{
	ErrHeaderTooSmall, ErrHeaderTooLarge, ErrInvalidHeaderLength, ErrInvalidHeader,
	ErrHeaderDeserialization, ErrUnknownDType, ErrInvalidOffset, ErrOverflow, ErrMisaligned,
	ErrTensorInvalidInfo, ErrIncompleteBuffer, ErrInvalidMetadata, ErrDuplicateTensor,
}

// FuzzParseHeader: ParseHeader never panics, every refusal wraps a format sentinel, and an accepted
// header satisfies the format's invariants and survives a rewrite through ComputeLayout. The seed
// corpus in testdata/fuzz/FuzzParseHeader holds the malformed files of the table tests.
func FuzzParseHeader(f *testing.F) {
	for _, c := range badHeaders {
		f.Add(c.file)
	}
	l, err := ComputeLayout([]TensorSpec{{"a", BF16, []int64{2, 3}}, {"b", F4, []int64{4}}, {"c", I32, nil}, {"z", U8, []int64{0, 5}}},
		map[string]string{"k": "v"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(bytes.Clone(l.Prefix), make([]byte, l.FileSize-l.DataStart())...))
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := parseBytes(file)
		if err != nil && !slices.ContainsFunc(formatErrors, func(s error) bool { return errors.Is(err, s) }) {
			t.Fatalf("error %q wraps no format sentinel", err)
		}
		checkAgainstStdlib(t, file, h, err)
		if err != nil {
			return
		}
		checkHeaderInvariants(t, h, int64(len(file)))
		checkRewrite(t, h, int64(len(file))-h.DataStart)
	})
}

// checkAgainstStdlib holds the header scanner to encoding/json: a header refused for its syntax is
// invalid JSON to encoding/json too, an accepted one is valid and has the same keys.
func checkAgainstStdlib(t *testing.T, file []byte, h *Header, err error) {
	t.Helper()
	if len(file) < 8 {
		return
	}
	n := binary.LittleEndian.Uint64(file)
	if n > uint64(len(file)-8) || !utf8.Valid(file[8:8+n]) {
		return
	}
	js := file[8 : 8+n]
	valid := json.Valid(js)
	switch {
	case errors.Is(err, errSyntax) && valid:
		t.Fatalf("refused as invalid JSON, which encoding/json accepts: %v", err)
	case errors.Is(err, ErrInvalidHeader) && !valid:
		t.Fatalf("refused as not an object, but encoding/json finds it invalid: %v", err)
	case err == nil && !valid:
		t.Fatalf("accepted a header encoding/json finds invalid: %q", js)
	case err == nil:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatalf("accepted header does not decode as an object: %v", err)
		}
		want := len(h.Tensors)
		if _, ok := m[metadataKey]; ok {
			want++
		}
		if len(m) != want {
			t.Fatalf("encoding/json sees %d keys, the parser %d tensors", len(m), len(h.Tensors))
		}
		for _, ti := range h.Tensors {
			if _, ok := m[ti.Name]; !ok {
				t.Fatalf("tensor %q is not a key for encoding/json", ti.Name)
			}
		}
	}
}

// checkHeaderInvariants: the tensors of an accepted header tile its data buffer exactly.
func checkHeaderInvariants(t *testing.T, h *Header, size int64) {
	t.Helper()
	if h.JSONSize < 0 || h.JSONSize > MaxHeaderSize || h.DataStart != 8+h.JSONSize || h.DataStart > size {
		t.Fatalf("JSONSize %d DataStart %d in a file of %d bytes", h.JSONSize, h.DataStart, size)
	}
	names := map[string]bool{}
	var end int64
	for _, ti := range h.Tensors {
		if ti.DataOffsets[0] != end {
			t.Fatalf("tensor %q begins at %d, previous ended at %d", ti.Name, ti.DataOffsets[0], end)
		}
		end = ti.DataOffsets[1]
		if names[ti.Name] || ti.Name == metadataKey {
			t.Fatalf("tensor name %q repeated or reserved", ti.Name)
		}
		names[ti.Name] = true
		if !ti.DType.Valid() || ti.Shape == nil {
			t.Fatalf("tensor %q: dtype %q shape %v", ti.Name, ti.DType, ti.Shape)
		}
		for _, d := range ti.Shape {
			if d < 0 {
				t.Fatalf("tensor %q: negative dimension", ti.Name)
			}
		}
		n, ok := ti.DType.ByteSize(uint64(ti.NumElements()))
		if !ok || int64(n) != ti.ByteSize() {
			t.Fatalf("tensor %q: %s %v in %d bytes", ti.Name, ti.DType, ti.Shape, ti.ByteSize())
		}
	}
	if end != size-h.DataStart {
		t.Fatalf("tensors end at %d, data buffer is %d bytes", end, size-h.DataStart)
	}
}

// checkRewrite lays the accepted tensors out again in file order: the offsets must be the same and
// the new header must parse to the same tensors and metadata.
func checkRewrite(t *testing.T, h *Header, bufSize int64) {
	t.Helper()
	specs := make([]TensorSpec, len(h.Tensors))
	for i, ti := range h.Tensors {
		if ti.Name == "" {
			return // valid in a file, refused by the writer
		}
		specs[i] = TensorSpec{ti.Name, ti.DType, ti.Shape}
	}
	l, err := ComputeLayout(specs, h.Metadata)
	if errors.Is(err, ErrHeaderTooLarge) {
		return
	}
	if err != nil {
		t.Fatalf("ComputeLayout of an accepted header: %v", err)
	}
	if l.FileSize-l.DataStart() != bufSize {
		t.Fatalf("rewritten data buffer %d bytes, want %d", l.FileSize-l.DataStart(), bufSize)
	}
	h2, err := parseHeaderJSON(l.Prefix[8:], bufSize, "")
	if err != nil {
		t.Fatalf("rewritten header refused: %v\n%s", err, l.Prefix[8:])
	}
	if len(h2.Tensors) != len(h.Tensors) {
		t.Fatalf("rewrite has %d tensors, want %d", len(h2.Tensors), len(h.Tensors))
	}
	for i := range h.Tensors {
		a, b := h.Tensors[i], h2.Tensors[i]
		if a.Name != b.Name || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || a.DataOffsets != b.DataOffsets {
			t.Fatalf("tensor %d: %+v rewritten as %+v", i, a, b)
		}
	}
	want := maps.Clone(h.Metadata)
	if want == nil {
		want = map[string]string{}
	}
	if _, ok := want["format"]; !ok {
		want["format"] = "pt"
	}
	if !maps.Equal(want, h2.Metadata) {
		t.Fatalf("metadata %v rewritten as %v", h.Metadata, h2.Metadata)
	}
}

// FuzzDecodeIndex: index parsing never panics, refusals wrap ErrInvalidIndex or ErrHostilePath,
// and an accepted index is valid JSON whose weight_map holds only plain file names.
func FuzzDecodeIndex(f *testing.F) {
	f.Add([]byte(`{"metadata": {"total_size": 6}, "weight_map": {"a": "s1.safetensors", "b\u00e9": "s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"a": "../x.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"a": "x", "a": "x"}, "other": [1, {"x": null}]}`))
	f.Add([]byte(`{"metadata": null, "weight_map": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := decodeIndex(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidIndex) && !errors.Is(err, ErrHostilePath) {
				t.Fatalf("error %q wraps neither ErrInvalidIndex nor ErrHostilePath", err)
			}
			if errors.Is(err, errSyntax) && json.Valid(data) {
				t.Fatalf("refused as invalid JSON, which encoding/json accepts: %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var std struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &std); err != nil || len(std.WeightMap) != len(ix.weightMap) {
			t.Fatalf("encoding/json reads the weight map as %v (%v), the parser as %v", std.WeightMap, err, ix.weightMap)
		}
		for name, file := range ix.weightMap {
			if std.WeightMap[name] != file || checkShardName(file) != nil {
				t.Fatalf("tensor %q: shard %q (encoding/json: %q)", name, file, std.WeightMap[name])
			}
		}
		if !slices.IsSorted(ix.shards) {
			t.Fatalf("shards not sorted: %v", ix.shards)
		}
	})
}
