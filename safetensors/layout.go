package safetensors

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// TensorSpec declares a tensor to be written: everything but its data and position.
type TensorSpec struct {
	Name  string
	DType DType
	Shape []int64
}

// Layout is the complete plan of a safetensors file: the header bytes and where every tensor goes.
// It is computed before any data is written, so that tensors can then be written in any order.
type Layout struct {
	// Prefix is the 8-byte little-endian header length followed by the header JSON, padded with
	// spaces so that len(Prefix)%8 == 0 and the data buffer starts 8-byte aligned.
	Prefix []byte
	// Tensors in spec order, with offsets relative to the data buffer.
	Tensors []TensorInfo
	// FileSize is the size of the complete file.
	FileSize int64

	index map[string]int // name -> position in Tensors; nil for a Layout not built by ComputeLayout
}

// ComputeLayout lays the tensors out back to back in spec order and renders the header. The
// metadata map is copied into __metadata__ with "format": "pt" added unless the caller sets
// "format" itself. The JSON holds __metadata__ first (keys sorted), then the tensors in spec order,
// without spaces: the same specs and metadata always give the same bytes.
func ComputeLayout(specs []TensorSpec, metadata map[string]string) (*Layout, error) {
	l := &Layout{Tensors: make([]TensorInfo, 0, len(specs)), index: make(map[string]int, len(specs))}
	var off int64
	for _, s := range specs {
		size, err := specBytes(s)
		if err != nil {
			return nil, err
		}
		if _, dup := l.index[s.Name]; dup {
			return nil, fmt.Errorf("safetensors: tensor %q: %w: listed twice", s.Name, ErrDuplicateTensor)
		}
		if off > maxInt64-size {
			return nil, fmt.Errorf("safetensors: tensor %q: %w: data buffer over 2^63-1 bytes", s.Name, ErrOverflow)
		}
		l.index[s.Name] = len(l.Tensors)
		l.Tensors = append(l.Tensors, TensorInfo{
			Name:        s.Name,
			DType:       s.DType,
			Shape:       slices.Clone(s.Shape),
			DataOffsets: [2]int64{off, off + size},
		})
		off += size
	}
	md := make(map[string]string, len(metadata)+1)
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("safetensors: metadata %q: %w: not valid UTF-8", k, ErrInvalidMetadata)
		}
		md[k] = v
	}
	if _, ok := md["format"]; !ok {
		md["format"] = "pt"
	}
	js := renderHeader(md, l.Tensors)
	if len(js) > MaxHeaderSize {
		return nil, fmt.Errorf("safetensors: %w: %d bytes, limit %d", ErrHeaderTooLarge, len(js), MaxHeaderSize)
	}
	l.Prefix = make([]byte, 8, 8+len(js))
	binary.LittleEndian.PutUint64(l.Prefix, uint64(len(js)))
	l.Prefix = append(l.Prefix, js...)
	if off > maxInt64-int64(len(l.Prefix)) {
		return nil, fmt.Errorf("safetensors: %w: file over 2^63-1 bytes", ErrOverflow)
	}
	l.FileSize = int64(len(l.Prefix)) + off
	return l, nil
}

const maxInt64 = 1<<63 - 1

// specBytes validates a spec and returns its byte size.
func specBytes(s TensorSpec) (int64, error) {
	switch {
	case s.Name == "":
		return 0, fmt.Errorf("safetensors: %w: empty tensor name", ErrInvalidSpec)
	case s.Name == metadataKey:
		return 0, fmt.Errorf("safetensors: tensor %q: %w: reserved name", s.Name, ErrInvalidSpec)
	case !utf8.ValidString(s.Name):
		return 0, fmt.Errorf("safetensors: tensor %q: %w: name is not valid UTF-8", s.Name, ErrInvalidSpec)
	case !s.DType.Valid():
		return 0, fmt.Errorf("safetensors: tensor %q: %w: %q", s.Name, ErrUnknownDType, string(s.DType))
	}
	for _, d := range s.Shape {
		if d < 0 {
			return 0, fmt.Errorf("safetensors: tensor %q: %w: negative dimension in %v", s.Name, ErrInvalidSpec, s.Shape)
		}
	}
	size, err := tensorBytes(s.DType, s.Shape)
	if err != nil {
		return 0, fmt.Errorf("safetensors: tensor %q: %w: %s %v", s.Name, err, s.DType, s.Shape)
	}
	return size, nil
}

// renderHeader writes the header JSON, padded with spaces to a multiple of 8 bytes.
func renderHeader(md map[string]string, ts []TensorInfo) []byte {
	var b []byte
	b = append(b, '{')
	if len(md) > 0 {
		keys := make([]string, 0, len(md))
		for k := range md {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `"__metadata__":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, md[k])
		}
		b = append(b, '}')
	}
	for i := range ts {
		t := &ts[i]
		if i > 0 || len(md) > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, t.Name)
		b = append(b, `:{"dtype":`...)
		b = appendJSONString(b, string(t.DType))
		b = append(b, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, t.DataOffsets[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, t.DataOffsets[1], 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	for len(b)%8 != 0 {
		b = append(b, ' ')
	}
	return b
}

// appendJSONString appends s, valid UTF-8, as a JSON string. It escapes what JSON requires plus
// U+2028 and U+2029, as encoding/json does, and nothing else.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// DataStart returns the file offset of the data buffer, len(Prefix).
func (l *Layout) DataStart() int64 { return int64(len(l.Prefix)) }

// Offset returns the absolute file offset and byte size of the named tensor; ok is false when the
// layout has no such tensor.
func (l *Layout) Offset(name string) (absolute int64, size int64, ok bool) {
	i, found := l.find(name)
	if !found {
		return 0, 0, false
	}
	t := &l.Tensors[i]
	return l.DataStart() + t.DataOffsets[0], t.ByteSize(), true
}

// find returns the position of the named tensor in l.Tensors.
func (l *Layout) find(name string) (int, bool) {
	if l.index != nil {
		i, ok := l.index[name]
		return i, ok
	}
	for i := range l.Tensors {
		if l.Tensors[i].Name == name {
			return i, true
		}
	}
	return 0, false
}
