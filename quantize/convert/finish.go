package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"pdq/safetensors"
)

// finish writes the indexes, configs, side files and the report: the last steps, so that a
// directory without them is recognisably unfinished.
func (r *runner) finish() (*Report, error) {
	p := r.plan
	for _, set := range []*shardSet{r.prefill, r.decode} {
		if set != nil && !set.allDone() {
			return nil, fmt.Errorf("convert: internal: %s has unfinished shards", set.out.Kind)
		}
	}
	extra := map[string]any{"producer": r.ro.Tool}
	for _, out := range []*Output{p.Prefill, p.Decode} {
		if out == nil {
			continue
		}
		dir := filepath.Join(r.dir, out.Kind)
		// Side files, then config.json, then the index: an output with an index is complete.
		if err := copySideFiles(p.Source.Dir, dir); err != nil {
			return nil, err
		}
		if out.CopySource {
			if err := copyFile(filepath.Join(p.Source.Dir, "config.json"), filepath.Join(dir, "config.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		} else if out.Config != nil {
			b, err := json.MarshalIndent(out.Config, "", "  ")
			if err != nil {
				return nil, err
			}
			if err := writeFileAtomic(filepath.Join(dir, "config.json"), append(b, '\n')); err != nil {
				return nil, err
			}
		}
		if out.CopySource {
			if p.Source.IndexPath != "" {
				if err := copyFile(p.Source.IndexPath, filepath.Join(dir, safetensors.IndexFileName)); err != nil {
					return nil, err
				}
			}
		} else if err := safetensors.WriteIndex(dir, out.Shards, extra); err != nil {
			return nil, err
		}
	}
	rep := r.report()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(r.dir, "report.json"), append(b, '\n')); err != nil {
		return nil, err
	}
	return rep, nil
}

// copySideFiles copies every regular file of the source directory that is not a weight shard, the
// index or config.json (tokenizer files, generation_config.json, chat templates, *.py, LICENSE,
// README) into dst.
func copySideFiles(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		regular := e.Type().IsRegular()
		if e.Type()&os.ModeSymlink != 0 { // a Hugging Face cache snapshot links to its blobs
			fi, err := os.Stat(filepath.Join(src, name))
			regular = err == nil && fi.Mode().IsRegular()
		}
		if !regular || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".safetensors") ||
			name == safetensors.IndexFileName || name == "config.json" {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}
