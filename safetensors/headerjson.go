package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// metadataKey is the reserved header key holding the string-to-string metadata map.
const metadataKey = "__metadata__"

// headerDecoder walks the header JSON as a token stream, so that duplicate keys are seen, numbers
// are parsed exactly as unsigned integers, and nothing is allocated from a count found in the file.
type headerDecoder struct {
	dec  *json.Decoder
	file string
}

// decodeHeader parses the header JSON into tensors (in JSON order) and metadata. It checks syntax
// and types, not offsets.
func decodeHeader(js []byte, file string) (*Header, error) {
	d := &headerDecoder{dec: json.NewDecoder(bytes.NewReader(js)), file: file}
	d.dec.UseNumber()
	tok, err := d.dec.Token()
	if err != nil {
		return nil, d.syntax("", err)
	}
	if tok != json.Delim('{') {
		return nil, headerErr(file, "", ErrInvalidHeader, fmt.Sprintf("not a JSON object (starts with %v)", tok))
	}
	h := &Header{}
	seen := map[string]struct{}{}
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return nil, d.syntax("", err)
		}
		key, ok := tok.(string)
		if !ok { // cannot happen: the decoder only returns strings in key position
			return nil, headerErr(file, "", ErrHeaderDeserialization, "object key is not a string")
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
	if _, err := d.dec.Token(); err != nil { // the closing brace
		return nil, d.syntax("", err)
	}
	if tok, err := d.dec.Token(); err != io.EOF {
		if err == nil {
			return nil, headerErr(file, "", ErrHeaderDeserialization, fmt.Sprintf("data after the header object: %v", tok))
		}
		return nil, d.syntax("", err)
	}
	return h, nil
}

// syntax wraps a decoder error as ErrHeaderDeserialization.
func (d *headerDecoder) syntax(tensor string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return headerErr(d.file, tensor, ErrHeaderDeserialization, err.Error())
}

// metadata decodes the value of __metadata__: an object of strings, or null.
func (d *headerDecoder) metadata() (map[string]string, error) {
	tok, err := d.dec.Token()
	if err != nil {
		return nil, d.syntax("", err)
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, headerErr(d.file, "", ErrInvalidMetadata, fmt.Sprintf("not an object (%v)", tok))
	}
	md := map[string]string{}
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return nil, d.syntax("", err)
		}
		k, _ := tok.(string)
		if tok, err = d.dec.Token(); err != nil {
			return nil, d.syntax("", err)
		}
		v, ok := tok.(string)
		if !ok {
			return nil, headerErr(d.file, "", ErrInvalidMetadata, fmt.Sprintf("key %q: value %v is not a string", k, tok))
		}
		if _, dup := md[k]; dup {
			return nil, headerErr(d.file, "", ErrInvalidMetadata, fmt.Sprintf("key %q appears twice", k))
		}
		md[k] = v
	}
	if _, err := d.dec.Token(); err != nil {
		return nil, d.syntax("", err)
	}
	return md, nil
}

// tensor decodes one tensor entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
// Unknown fields are skipped, as the reference implementation does; repeated fields are refused.
func (d *headerDecoder) tensor(name string) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	bad := func(detail string) (TensorInfo, error) {
		return TensorInfo{}, headerErr(d.file, name, ErrHeaderDeserialization, detail)
	}
	tok, err := d.dec.Token()
	if err != nil {
		return TensorInfo{}, d.syntax(name, err)
	}
	if tok != json.Delim('{') {
		return bad(fmt.Sprintf("tensor entry is not an object (%v)", tok))
	}
	var haveDType, haveShape, haveOffsets bool
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return TensorInfo{}, d.syntax(name, err)
		}
		field, _ := tok.(string)
		switch field {
		case "dtype":
			if haveDType {
				return bad("field dtype appears twice")
			}
			haveDType = true
			tok, err := d.dec.Token()
			if err != nil {
				return TensorInfo{}, d.syntax(name, err)
			}
			s, ok := tok.(string)
			if !ok {
				return bad(fmt.Sprintf("dtype %v is not a string", tok))
			}
			if t.DType, err = ParseDType(s); err != nil {
				return TensorInfo{}, headerErr(d.file, name, err, "")
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
			var skip json.RawMessage
			if err := d.dec.Decode(&skip); err != nil {
				return TensorInfo{}, d.syntax(name, err)
			}
		}
	}
	if _, err := d.dec.Token(); err != nil {
		return TensorInfo{}, d.syntax(name, err)
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
	tok, err := d.dec.Token()
	if err != nil {
		return nil, d.syntax(name, err)
	}
	if tok != json.Delim('[') {
		return bad(fmt.Sprintf("%v is not an array", tok))
	}
	var out []int64
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return nil, d.syntax(name, err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return bad(fmt.Sprintf("element %v is not a number", tok))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return bad(fmt.Sprintf("%s is out of range", num))
			}
			return bad(fmt.Sprintf("%s is not a non-negative integer", num))
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
	if _, err := d.dec.Token(); err != nil {
		return nil, d.syntax(name, err)
	}
	if want >= 0 && len(out) != want {
		return bad(fmt.Sprintf("%d elements, want %d", len(out), want))
	}
	return out, nil
}
