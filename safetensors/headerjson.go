package safetensors

import (
	"fmt"
	"math"
)

// metadataKey is the reserved header key holding the string-to-string metadata map.
const metadataKey = "__metadata__"

// dtypeByName maps a dtype's spelling to the DType constant, so that looking it up from header
// bytes allocates nothing.
var dtypeByName = func() map[string]DType {
	m := make(map[string]DType, len(dtypeBits))
	for d := range dtypeBits {
		m[string(d)] = d
	}
	return m
}()

// headerDecoder reads the header JSON with a strict scanner, so that duplicate keys are seen,
// numbers are parsed exactly as unsigned integers, and nothing is allocated from a count found in
// the file.
type headerDecoder struct {
	s    scanner
	file string
}

// decodeHeader parses the header JSON (valid UTF-8) into tensors, in JSON order, and metadata. It
// checks syntax and types, not offsets.
func decodeHeader(js []byte, file string) (*Header, error) {
	d := &headerDecoder{s: scanner{b: js}, file: file}
	if c := d.s.ws(); c != '{' {
		if c == 0 && d.s.i >= len(js) {
			return nil, d.syntax("", d.s.errorf("empty header"))
		}
		if _, err := d.s.skip(0); err != nil {
			return nil, d.syntax("", err)
		}
		if err := d.s.end(); err != nil {
			return nil, d.syntax("", err)
		}
		return nil, headerErr(file, "", ErrInvalidHeader, "not a JSON object")
	}
	d.s.i++
	h := &Header{}
	seen := map[string]struct{}{}
	for first := true; ; first = false {
		ok, err := d.s.more('}', first)
		if err != nil {
			return nil, d.syntax("", err)
		}
		if !ok {
			break
		}
		key, err := d.s.key()
		if err != nil {
			return nil, d.syntax("", err)
		}
		if _, dup := seen[key]; dup {
			if key == metadataKey {
				return nil, headerErr(file, "", ErrInvalidMetadata, "__metadata__ appears twice")
			}
			return nil, headerErr(file, key, ErrDuplicateTensor, "key appears twice in the header")
		}
		seen[key] = struct{}{}
		if key == metadataKey {
			if h.Metadata, err = d.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		t, err := d.tensor(key)
		if err != nil {
			return nil, err
		}
		h.Tensors = append(h.Tensors, t)
	}
	if err := d.s.end(); err != nil {
		return nil, d.syntax("", err)
	}
	return h, nil
}

// syntax wraps a scanner error as ErrHeaderDeserialization.
func (d *headerDecoder) syntax(tensor string, err error) error {
	return headerErr(d.file, tensor, ErrHeaderDeserialization, err.Error())
}

// metadata decodes the value of __metadata__: an object of strings, or null.
func (d *headerDecoder) metadata() (map[string]string, error) {
	switch d.s.ws() {
	case 'n':
		if _, err := d.s.literal(); err != nil {
			return nil, d.syntax("", err)
		}
		return nil, nil
	case '{':
		d.s.i++
	default:
		return nil, headerErr(d.file, "", ErrInvalidMetadata, fmt.Sprintf("%s, not an object", d.s.kind()))
	}
	md := map[string]string{}
	for first := true; ; first = false {
		ok, err := d.s.more('}', first)
		if err != nil {
			return nil, d.syntax("", err)
		}
		if !ok {
			return md, nil
		}
		k, err := d.s.key()
		if err != nil {
			return nil, d.syntax("", err)
		}
		if d.s.ws() != '"' {
			return nil, headerErr(d.file, "", ErrInvalidMetadata, fmt.Sprintf("key %q: %s, not a string", k, d.s.kind()))
		}
		v, err := d.s.str()
		if err != nil {
			return nil, d.syntax("", err)
		}
		if _, dup := md[k]; dup {
			return nil, headerErr(d.file, "", ErrInvalidMetadata, fmt.Sprintf("key %q appears twice", k))
		}
		md[k] = v
	}
}

// tensor decodes one tensor entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
// Unknown fields are skipped, as the reference implementation does; repeated fields are refused.
func (d *headerDecoder) tensor(name string) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	bad := func(detail string) (TensorInfo, error) {
		return TensorInfo{}, headerErr(d.file, name, ErrHeaderDeserialization, detail)
	}
	if d.s.ws() != '{' {
		return bad(fmt.Sprintf("tensor entry is %s, not an object", d.s.kind()))
	}
	d.s.i++
	var haveDType, haveShape, haveOffsets bool
	for first := true; ; first = false {
		ok, err := d.s.more('}', first)
		if err != nil {
			return TensorInfo{}, d.syntax(name, err)
		}
		if !ok {
			break
		}
		field, err := d.s.keyBytes()
		if err != nil {
			return TensorInfo{}, d.syntax(name, err)
		}
		switch string(field) {
		case "dtype":
			if haveDType {
				return bad("field dtype appears twice")
			}
			haveDType = true
			if d.s.ws() != '"' {
				return bad(fmt.Sprintf("dtype is %s, not a string", d.s.kind()))
			}
			s, err := d.s.strBytes()
			if err != nil {
				return TensorInfo{}, d.syntax(name, err)
			}
			if t.DType, ok = dtypeByName[string(s)]; !ok {
				return TensorInfo{}, headerErr(d.file, name, ErrUnknownDType, fmt.Sprintf("%q", s))
			}
		case "shape":
			if haveShape {
				return bad("field shape appears twice")
			}
			haveShape = true
			if t.Shape, err = d.uints(name, "shape", -1); err != nil {
				return TensorInfo{}, err
			}
		case "data_offsets":
			if haveOffsets {
				return bad("field data_offsets appears twice")
			}
			haveOffsets = true
			offs, err := d.uints(name, "data_offsets", 2)
			if err != nil {
				return TensorInfo{}, err
			}
			t.DataOffsets = [2]int64{offs[0], offs[1]}
		default:
			if _, err := d.s.skip(2); err != nil { // inside the header and the tensor objects
				return TensorInfo{}, d.syntax(name, err)
			}
		}
	}
	switch {
	case !haveDType:
		return bad("missing field dtype")
	case !haveShape:
		return bad("missing field shape")
	case !haveOffsets:
		return bad("missing field data_offsets")
	}
	if t.Shape == nil {
		t.Shape = []int64{}
	}
	return t, nil
}

// uints decodes an array of non-negative integers that fit in an int64. want is the required
// length, or -1 for any length. Values between 2^63 and 2^64-1 are valid JSON for the reference
// implementation but cannot be a dimension or offset of a real file: ErrOverflow for a
// dimension, ErrInvalidOffset for an offset.
func (d *headerDecoder) uints(name, field string, want int) ([]int64, error) {
	bad := func(detail string) ([]int64, error) {
		return nil, headerErr(d.file, name, ErrHeaderDeserialization, field+": "+detail)
	}
	if d.s.ws() != '[' {
		return bad(fmt.Sprintf("%s, not an array", d.s.kind()))
	}
	d.s.i++
	out := make([]int64, 0, 4)
	for first := true; ; first = false {
		ok, err := d.s.more(']', first)
		if err != nil {
			return nil, d.syntax(name, err)
		}
		if !ok {
			break
		}
		if c := d.s.ws(); c != '-' && (c < '0' || c > '9') {
			return bad(fmt.Sprintf("element is %s, not a number", d.s.kind()))
		}
		v, err := d.s.uint()
		if err != nil {
			return bad(err.Error())
		}
		if v > math.MaxInt64 {
			sentinel := ErrOverflow
			if field == "data_offsets" {
				sentinel = ErrInvalidOffset
			}
			return nil, headerErr(d.file, name, sentinel, fmt.Sprintf("%s: %d is over 2^63-1", field, v))
		}
		if want >= 0 && len(out) == want {
			return bad(fmt.Sprintf("more than %d elements", want))
		}
		out = append(out, int64(v))
	}
	if want >= 0 && len(out) != want {
		return bad(fmt.Sprintf("want %d elements, found %d", want, len(out)))
	}
	return out, nil
}
