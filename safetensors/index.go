package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"pdq/internal/fsutil"
)

// MaxIndexSize is the largest model.safetensors.index.json read (a 120,000-tensor index is about
// 12 MB).
const MaxIndexSize = 64 << 20

// index is a parsed model.safetensors.index.json.
type index struct {
	metadata  map[string]any    // "metadata", numbers as json.Number; nil when absent
	weightMap map[string]string // tensor -> shard file name
	shards    []string          // distinct shard names, sorted
	first     map[string]string // shard name -> its first tensor by name, for error messages
}

// readIndex reads and checks an index file: a JSON object with a "weight_map" object of strings,
// each a plain file name, and an optional "metadata" object. Other keys are ignored; repeated keys
// are refused.
func readIndex(path string) (*index, error) {
	data, err := fsutil.ReadRegularFile(path, MaxIndexSize)
	if errors.Is(err, fsutil.ErrFileTooLarge) {
		return nil, fmt.Errorf("safetensors: %w (%w)", err, ErrInvalidIndex)
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	ix, err := decodeIndex(data)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return ix, nil
}

// decodeIndex parses the index JSON. Errors wrap ErrInvalidIndex or ErrHostilePath.
func decodeIndex(data []byte) (*index, error) {
	bad := func(err error) error { return fmt.Errorf("%w: %w", ErrInvalidIndex, err) }
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalidIndex)
	}
	s := &scanner{b: data}
	if s.ws() != '{' {
		if _, err := s.skip(0); err != nil {
			return nil, bad(err)
		}
		if err := s.end(); err != nil {
			return nil, bad(err)
		}
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidIndex)
	}
	s.i++
	ix := &index{}
	seen := map[string]bool{}
	for first := true; ; first = false {
		ok, err := s.more('}', first)
		if err != nil {
			return nil, bad(err)
		}
		if !ok {
			break
		}
		key, err := s.key()
		if err != nil {
			return nil, bad(err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%w: key %q appears twice", ErrInvalidIndex, key)
		}
		seen[key] = true
		switch key {
		case "metadata":
			raw, err := s.skip(1)
			if err != nil {
				return nil, bad(err)
			}
			if ix.metadata, err = decodeIndexMetadata(raw); err != nil {
				return nil, err
			}
		case "weight_map":
			if ix.weightMap, err = decodeWeightMap(s); err != nil {
				return nil, err
			}
		default:
			if _, err := s.skip(1); err != nil {
				return nil, bad(err)
			}
		}
	}
	if err := s.end(); err != nil {
		return nil, bad(err)
	}
	if ix.weightMap == nil {
		return nil, fmt.Errorf("%w: no weight_map", ErrInvalidIndex)
	}
	ix.first = map[string]string{}
	for tensor, shard := range ix.weightMap {
		if prev, ok := ix.first[shard]; !ok {
			ix.shards = append(ix.shards, shard)
			ix.first[shard] = tensor
		} else if tensor < prev {
			ix.first[shard] = tensor
		}
	}
	slices.Sort(ix.shards)
	return ix, nil
}

// decodeIndexMetadata decodes the "metadata" value, an object or null, keeping numbers exact as
// json.Number.
func decodeIndexMetadata(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var md any
	if err := dec.Decode(&md); err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrInvalidIndex, err)
	}
	if md == nil {
		return nil, nil
	}
	m, ok := md.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: metadata is not an object", ErrInvalidIndex)
	}
	return m, nil
}

// decodeWeightMap reads the weight_map object, refusing repeated tensors and hostile file names.
func decodeWeightMap(s *scanner) (map[string]string, error) {
	bad := func(err error) error { return fmt.Errorf("%w: weight_map: %w", ErrInvalidIndex, err) }
	if s.ws() != '{' {
		return nil, fmt.Errorf("%w: weight_map is %s, not an object", ErrInvalidIndex, s.kind())
	}
	s.i++
	wm := map[string]string{}
	for first := true; ; first = false {
		ok, err := s.more('}', first)
		if err != nil {
			return nil, bad(err)
		}
		if !ok {
			return wm, nil
		}
		name, err := s.key()
		if err != nil {
			return nil, bad(err)
		}
		if s.ws() != '"' {
			return nil, fmt.Errorf("tensor %q: %w: shard is %s, not a string", name, ErrInvalidIndex, s.kind())
		}
		file, err := s.str()
		if err != nil {
			return nil, bad(err)
		}
		if _, dup := wm[name]; dup {
			return nil, fmt.Errorf("tensor %q: %w: listed twice in weight_map", name, ErrInvalidIndex)
		}
		if err := checkShardName(file); err != nil {
			return nil, fmt.Errorf("tensor %q: shard %q: %w", name, file, err)
		}
		wm[name] = file
	}
}
