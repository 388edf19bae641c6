package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// stFile assembles a safetensors file: the 8-byte length of js, js, then data.
func stFile(js string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return append(b, data...)
}

func parseBytes(b []byte) (*Header, error) { return ParseHeader(bytes.NewReader(b), int64(len(b))) }

// tenAtSameOffsets is ten F32 [2,2] tensors all claiming bytes [0, 16).
func tenAtSameOffsets() []byte {
	var parts []string
	for i := range 10 {
		parts = append(parts, fmt.Sprintf(`"weight_%d":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}`, i))
	}
	return stFile("{"+strings.Join(parts, ",")+"}", make([]byte, 16))
}

const i32x4 = `{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`

// badHeaders are the malformed files every reader must refuse, each with its sentinel error and a
// piece of text the message must hold (the tensor concerned).
var badHeaders = []struct {
	name    string
	file    []byte
	want    error
	mention string
}{
	{"ten tensors at the same offsets", tenAtSameOffsets(), ErrInvalidOffset, `"weight_1"`},
	{"header length 0xFFFFFF000000003C", append([]byte("<\x00\x00\x00\x00\xff\xff\xff"), i32x4+strings.Repeat("\x00", 16)...), ErrHeaderTooLarge, ""},
	{"header length just over the limit", binary.LittleEndian.AppendUint64(nil, MaxHeaderSize+1), ErrHeaderTooLarge, ""},
	{"empty file", nil, ErrHeaderTooSmall, ""},
	{"seven bytes", make([]byte, 7), ErrHeaderTooSmall, ""},
	{"header length past EOF", []byte("<\x00\x00\x00\x00\x00\x00\x00"), ErrInvalidHeaderLength, ""},
	{"non-UTF-8 header", []byte("\x01\x00\x00\x00\x00\x00\x00\x00\xff"), ErrInvalidHeader, ""},
	{"header is just {", []byte("\x01\x00\x00\x00\x00\x00\x00\x00{"), ErrHeaderDeserialization, ""},
	{"empty header", stFile("", nil), ErrHeaderDeserialization, ""},
	{"whitespace header", stFile("   ", nil), ErrHeaderDeserialization, ""},
	{"header is an array", stFile("[]", nil), ErrInvalidHeader, ""},
	{"data after the object", stFile("{} x", nil), ErrHeaderDeserialization, ""},
	{"two objects", stFile("{}{}", nil), ErrHeaderDeserialization, ""},
	{"I32 [2,2] with 4 bytes", stFile(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrTensorInvalidInfo, `"test"`},
	{"shape [2, 2^64-2]", stFile(`{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrOverflow, `"test"`},
	{"shape [2, 2^63-1]", stFile(`{"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrOverflow, `"test"`},
	{"byte size over 2^64", stFile(`{"test":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrOverflow, `"test"`},
	{"dimension 2^64", stFile(`{"test":{"dtype":"I32","shape":[18446744073709551616],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrHeaderDeserialization, `"test"`},
	{"trailing bytes after the data", stFile(i32x4, append(make([]byte, 16), "extra_bogus_data_for_polyglot_file"...)), ErrIncompleteBuffer, ""},
	{"truncated data", stFile(i32x4, make([]byte, 14)), ErrIncompleteBuffer, ""},
	{"hole between tensors", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}`, make([]byte, 12)), ErrInvalidOffset, `"b"`},
	{"overlapping tensors", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, make([]byte, 6)), ErrInvalidOffset, `"b"`},
	{"first tensor not at 0", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}`, make([]byte, 8)), ErrInvalidOffset, `"a"`},
	{"end before begin", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}`, make([]byte, 4)), ErrInvalidOffset, `"b"`},
	{"offset over 2^63", stFile(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[9223372036854775808,9223372036854775808]}}`, nil), ErrInvalidOffset, `"a"`},
	{"unknown dtype", stFile(`{"test":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrUnknownDType, `"test"`},
	{"dtype not a string", stFile(`{"test":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrHeaderDeserialization, `"test"`},
	{"metadata with a number value", stFile(`{"__metadata__":{"format":"pt","n":1}}`, nil), ErrInvalidMetadata, ""},
	{"metadata with an object value", stFile(`{"__metadata__":{"format":{}}}`, nil), ErrInvalidMetadata, ""},
	{"metadata is a string", stFile(`{"__metadata__":"pt"}`, nil), ErrInvalidMetadata, ""},
	{"metadata key twice", stFile(`{"__metadata__":{"a":"1","a":"2"}}`, nil), ErrInvalidMetadata, ""},
	{"metadata twice", stFile(`{"__metadata__":{},"__metadata__":{}}`, nil), ErrInvalidMetadata, ""},
	{"tensor named __metadata__", stFile(`{"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrInvalidMetadata, ""},
	{"negative dimension", stFile(`{"test":{"dtype":"I32","shape":[-1,2],"data_offsets":[0,8]}}`, make([]byte, 8)), ErrHeaderDeserialization, `"test"`},
	{"fractional dimension", stFile(`{"test":{"dtype":"I32","shape":[2.0],"data_offsets":[0,8]}}`, make([]byte, 8)), ErrHeaderDeserialization, `"test"`},
	{"exponent dimension", stFile(`{"test":{"dtype":"I32","shape":[2e0],"data_offsets":[0,8]}}`, make([]byte, 8)), ErrHeaderDeserialization, `"test"`},
	{"string dimension", stFile(`{"test":{"dtype":"I32","shape":["2"],"data_offsets":[0,8]}}`, make([]byte, 8)), ErrHeaderDeserialization, `"test"`},
	{"duplicate tensor key", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}`, make([]byte, 8)), ErrDuplicateTensor, `"a"`},
	{"duplicate field", stFile(`{"a":{"dtype":"U8","dtype":"I8","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrHeaderDeserialization, `"a"`},
	{"missing data_offsets", stFile(`{"a":{"dtype":"U8","shape":[4]}}`, make([]byte, 4)), ErrHeaderDeserialization, `"a"`},
	{"missing shape", stFile(`{"a":{"dtype":"U8","data_offsets":[0,4]}}`, make([]byte, 4)), ErrHeaderDeserialization, `"a"`},
	{"three offsets", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4,4]}}`, make([]byte, 4)), ErrHeaderDeserialization, `"a"`},
	{"one offset", stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0]}}`, make([]byte, 4)), ErrHeaderDeserialization, `"a"`},
	{"tensor entry not an object", stFile(`{"a":[1,2]}`, nil), ErrHeaderDeserialization, `"a"`},
	{"half a byte", stFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}`, make([]byte, 1)), ErrMisaligned, `"a"`},
	{"bad escape in a name", stFile(`{"a\x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, nil), ErrHeaderDeserialization, ""},
}

func TestParseHeaderRejects(t *testing.T) {
	for _, c := range badHeaders {
		t.Run(c.name, func(t *testing.T) {
			h, err := parseBytes(c.file)
			if err == nil {
				t.Fatalf("accepted: %+v", h)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %q does not wrap %q", err, c.want)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %s", err, c.mention)
			}
		})
	}
}

func TestParseHeaderAccepts(t *testing.T) {
	cases := []struct {
		name    string
		file    []byte
		tensors []TensorInfo
		md      map[string]string
	}{
		{"I32 [2,2]", stFile(i32x4, make([]byte, 16)),
			[]TensorInfo{{"test", I32, []int64{2, 2}, [2]int64{0, 16}}}, nil},
		{"empty", stFile("{}", nil), nil, nil},
		{"trailing whitespace", stFile("{}\r \t\n", nil), nil, nil},
		{"leading whitespace", stFile("\t\n {} ", nil), nil, nil},
		{"zero-size tensor", stFile(`{"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0,0]}}`, nil),
			[]TensorInfo{{"test", I32, []int64{2, 0}, [2]int64{0, 0}}}, nil},
		{"rank-0 tensor", stFile(`{"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}`, make([]byte, 4)),
			[]TensorInfo{{"test", I32, []int64{}, [2]int64{0, 4}}}, nil},
		{"metadata null", stFile(`{"__metadata__":null}`, nil), nil, nil},
		{"metadata and unknown field", stFile(`{"b":{"dtype":"BF16","shape":[3],"data_offsets":[2,8],"extra":{"x":[1,{}]}},"__metadata__":{"format":"pt","k":"\u00e9"},"a":{"data_offsets":[0,2],"shape":[1],"dtype":"F16"}}`, make([]byte, 8)),
			[]TensorInfo{{"a", F16, []int64{1}, [2]int64{0, 2}}, {"b", BF16, []int64{3}, [2]int64{2, 8}}},
			map[string]string{"format": "pt", "k": "é"}},
		{"zero-size tensors sort by name", stFile(`{"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"y":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, make([]byte, 1)),
			[]TensorInfo{{"x", U8, []int64{0}, [2]int64{0, 0}}, {"z", U8, []int64{0}, [2]int64{0, 0}}, {"y", U8, []int64{1}, [2]int64{0, 1}}}, nil},
		{"F4 pairs", stFile(`{"a":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, make([]byte, 3)),
			[]TensorInfo{{"a", F4, []int64{2, 3}, [2]int64{0, 3}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := parseBytes(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Tensors) != len(c.tensors) {
				t.Fatalf("got %d tensors %+v, want %+v", len(h.Tensors), h.Tensors, c.tensors)
			}
			for i := range c.tensors {
				g, w := h.Tensors[i], c.tensors[i]
				if g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || g.Shape == nil || g.DataOffsets != w.DataOffsets {
					t.Errorf("tensor %d: got %+v, want %+v", i, g, w)
				}
			}
			if fmt.Sprint(h.Metadata) != fmt.Sprint(c.md) || (h.Metadata == nil) != (c.md == nil) {
				t.Errorf("metadata %v, want %v", h.Metadata, c.md)
			}
			n := int64(binary.LittleEndian.Uint64(c.file))
			if h.JSONSize != n || h.DataStart != 8+n {
				t.Errorf("JSONSize %d DataStart %d, want %d and %d", h.JSONSize, h.DataStart, n, 8+n)
			}
		})
	}
}

func TestTensorInfoSizes(t *testing.T) {
	ti := TensorInfo{DType: BF16, Shape: []int64{3, 5}, DataOffsets: [2]int64{10, 40}}
	if ti.NumElements() != 15 || ti.ByteSize() != 30 {
		t.Errorf("NumElements %d ByteSize %d, want 15 and 30", ti.NumElements(), ti.ByteSize())
	}
	scalar := TensorInfo{DType: F32, Shape: []int64{}}
	if scalar.NumElements() != 1 {
		t.Errorf("rank-0 NumElements %d, want 1", scalar.NumElements())
	}
}
