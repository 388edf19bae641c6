package convert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"

	"pdq/internal/fsutil"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// ErrLinkOutside: a source file the outputs are made from is a symbolic link to a file outside
// the source directory (and outside a Hugging Face cache's blobs/), as tokenizer links are
// refused: its target is not the model's.
var ErrLinkOutside = errors.New("a source file links outside the source directory")

// ErrQuantizedSource: the source is already an INT4 (compressed-tensors) checkpoint; pdq
// converts from a model's BF16 or FP8 original only, and no option changes that.
var ErrQuantizedSource = errors.New("source already quantized")

// checkSourceLinks refuses a source config.json that links outside the source (unless the plan
// uses a config file given explicitly).
func checkSourceLinks(p *Plan) error {
	if p.ConfigFile != "" {
		return nil
	}
	if ok, why := sideFileAllowed(p.Source.Dir, rules.ConfigFileName); !ok && why != "" && why != "a dangling link" {
		return fmt.Errorf("convert: %s: %w (%s)", filepath.Join(p.Source.Dir, rules.ConfigFileName), ErrLinkOutside, why)
	}
	return nil
}

// readSourceFile reads a source file at copy time with the checks of plan time: a regular file
// (opened without blocking, so a FIFO put in its place is refused, not waited on) of at most limit
// bytes (so /dev/zero cannot fill the disk); otherwise the file changed since it was read.
func readSourceFile(path string, limit int64) ([]byte, error) {
	b, err := fsutil.ReadRegularFile(path, limit)
	if err != nil {
		return nil, fmt.Errorf("convert: %s: %w since it was read: %w", path, ErrSourceChanged, err)
	}
	return b, nil
}

// copySourceConfig copies the config.json the plan read into dst, refusing one changed since.
func copySourceConfig(p *Plan, dst string) error {
	path := filepath.Join(p.Source.Dir, rules.ConfigFileName)
	if p.ConfigFile != "" {
		path = p.ConfigFile
	}
	b, err := readSourceFile(path, rules.MaxConfigBytes)
	if err != nil {
		return err
	}
	same := false
	if p.ConfigFile != "" {
		sum := sha256.Sum256(b)
		same = hex.EncodeToString(sum[:]) == p.ConfigSHA256
	} else {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var cfg map[string]any
		same = dec.Decode(&cfg) == nil && reflect.DeepEqual(cfg, p.Config)
	}
	if !same {
		return fmt.Errorf("convert: %s: %w: its content differs from what the plan read", path, ErrSourceChanged)
	}
	return writeFileAtomic(dst, b)
}

// copySourceIndex copies the source's index into dst, refusing one that no longer places every
// tensor in the shard the checkpoint was opened with.
func copySourceIndex(src *safetensors.Checkpoint, dst string) error {
	b, err := readSourceFile(src.IndexPath, safetensors.MaxIndexSize)
	if err != nil {
		return err
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	same := json.Unmarshal(b, &ix) == nil && len(ix.WeightMap) == len(src.Tensors())
	for _, t := range src.Tensors() {
		if !same {
			break
		}
		same = ix.WeightMap[t.Name] == t.Shard.Name
	}
	if !same {
		return fmt.Errorf("convert: %s: %w: it no longer places the tensors as when opened", src.IndexPath, ErrSourceChanged)
	}
	return writeFileAtomic(dst, b)
}
