package publish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// manifestFields and fileFields are the exact JSON field names of Manifest and File.
var (
	manifestFields = jsonFields(reflect.TypeFor[Manifest]())
	fileFields     = jsonFields(reflect.TypeFor[File]())
)

func jsonFields(t reflect.Type) map[string]bool {
	m := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}

// checkStrictJSON refuses what encoding/json would let through into a Manifest: bytes after
// the one JSON value, object keys that match a field only when case is ignored, and keys given
// twice, in the manifest object and in each file object.
func checkStrictJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkJSON(dec, "", manifestFields); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the manifest's JSON value")
	}
	return nil
}

// walkJSON reads one value. When fields is not nil, an object's keys must each be one of fields
// and appear once, and an array's elements are checked against fields in turn (the "files"
// array of the manifest object is walked with fileFields).
func walkJSON(dec *json.Decoder, where string, fields map[string]bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k := kt.(string)
			if fields != nil {
				if !fields[k] {
					return fmt.Errorf("unknown field %q%s", k, where)
				}
				if seen[k] {
					return fmt.Errorf("field %q given twice%s", k, where)
				}
				seen[k] = true
			}
			var sub map[string]bool
			if fields != nil && where == "" && k == "files" {
				sub = fileFields
			}
			if err := walkJSON(dec, where, sub); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkJSON(dec, fmt.Sprintf(" in files[%d]", i), fields); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
