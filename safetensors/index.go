package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// maxIndexSize bounds the index file read into memory (a 120,000-tensor index is about 12 MB).
const maxIndexSize = 1 << 30

// index is a parsed model.safetensors.index.json.
type index struct {
	metadata  map[string]any    // "metadata", numbers as json.Number; nil when absent
	weightMap map[string]string // tensor -> shard file name
	shards    []string          // distinct shard names, sorted
}

// readIndex reads and checks an index file: a JSON object with a "weight_map" object of strings,
// each a plain file name, and an optional "metadata" object. Other keys are ignored; repeated keys
// are refused.
func readIndex(path string) (*index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if len(data) > maxIndexSize {
		return nil, fmt.Errorf("safetensors: %s: %w: over %d bytes", path, ErrInvalidIndex, maxIndexSize)
	}
	ix, err := decodeIndex(data)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return ix, nil
}

// decodeIndex parses the index JSON. Errors wrap ErrInvalidIndex or ErrHostilePath.
func decodeIndex(data []byte) (*index, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidIndex, fmt.Sprintf(format, args...))
	}
	syntax := func(err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return bad("%v", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, syntax(err)
	}
	if tok != json.Delim('{') {
		return nil, bad("not a JSON object")
	}
	ix := &index{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, bad("key %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "metadata":
			var md any
			if err := dec.Decode(&md); err != nil {
				return nil, syntax(err)
			}
			if md != nil {
				m, ok := md.(map[string]any)
				if !ok {
					return nil, bad("metadata is not an object")
				}
				ix.metadata = m
			}
		case "weight_map":
			if ix.weightMap, err = decodeWeightMap(dec); err != nil {
				return nil, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, syntax(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntax(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("data after the index object")
	}
	if ix.weightMap == nil {
		return nil, bad("no weight_map")
	}
	set := map[string]struct{}{}
	for _, s := range ix.weightMap {
		if _, ok := set[s]; !ok {
			set[s] = struct{}{}
			ix.shards = append(ix.shards, s)
		}
	}
	slices.Sort(ix.shards)
	return ix, nil
}

// decodeWeightMap reads the weight_map object, refusing repeated tensors and hostile file names.
func decodeWeightMap(dec *json.Decoder) (map[string]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidIndex, err)
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: weight_map is not an object", ErrInvalidIndex)
	}
	wm := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidIndex, err)
		}
		name, _ := tok.(string)
		if tok, err = dec.Token(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidIndex, err)
		}
		file, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("tensor %q: %w: shard %v is not a string", name, ErrInvalidIndex, tok)
		}
		if _, dup := wm[name]; dup {
			return nil, fmt.Errorf("tensor %q: %w: listed twice in weight_map", name, ErrInvalidIndex)
		}
		if err := checkShardName(file); err != nil {
			return nil, fmt.Errorf("tensor %q: shard %q: %w", name, file, err)
		}
		wm[name] = file
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidIndex, err)
	}
	return wm, nil
}
