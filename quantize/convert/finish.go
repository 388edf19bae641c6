package convert

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"pdq/quantize/report"
	"pdq/safetensors"
)

// finish writes the indexes, configs, side files and the report: the last steps, so that a
// directory without them is recognisably unfinished.
func (r *runner) finish() (*report.Report, error) {
	p := r.plan
	for _, set := range r.sets() {
		if !set.allDone() {
			return nil, fmt.Errorf("convert: internal: %s has unfinished shards", set.out.Kind)
		}
	}
	extra := map[string]any{"producer": r.ro.Tool}
	for _, out := range p.Outputs {
		dir := filepath.Join(r.dir, string(out.Kind))
		// Side files, then config.json, then the index: an output with an index is complete.
		if err := copySideFiles(p.Source.Dir, dir); err != nil {
			return nil, err
		}
		if out.CopySource && !out.WriteConfig {
			if p.Config != nil || p.ConfigFile != "" {
				if err := copySourceConfig(p, filepath.Join(dir, "config.json")); err != nil {
					return nil, err
				}
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
				if err := copySourceIndex(p.Source, filepath.Join(dir, safetensors.IndexFileName)); err != nil {
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
// README) into dst. A symbolic link is followed only to a file inside the source directory or,
// for a Hugging Face cache snapshot (.../snapshots/REV), inside that repository's blobs/; any
// other link (a tokenizer.json pointing at /etc/shadow) is skipped with a warning.
func copySideFiles(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".safetensors") ||
			name == safetensors.IndexFileName || name == "config.json" {
			continue
		}
		if ok, why := sideFileAllowed(src, name); !ok {
			if why != "" {
				slog.Warn("side file not copied", "file", filepath.Join(src, name), "why", why)
			}
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

// sideFileAllowed reports whether src/name is a regular file convert may copy into an output:
// the file itself, or a symbolic link resolving inside src or a Hugging Face cache blobs/
// directory of src's repository. why says why a link is refused ("" for a directory or
// other non-file, which is skipped silently).
func sideFileAllowed(src, name string) (ok bool, why string) {
	path := filepath.Join(src, name)
	li, err := os.Lstat(path)
	if err != nil {
		return false, err.Error()
	}
	if li.Mode().IsRegular() {
		return true, ""
	}
	if li.Mode()&os.ModeSymlink == 0 {
		return false, ""
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, "a dangling link"
	}
	if fi, err := os.Stat(target); err != nil || !fi.Mode().IsRegular() {
		return false, ""
	}
	root, err := filepath.EvalSymlinks(src)
	if err != nil {
		return false, err.Error()
	}
	if within(target, root) {
		return true, ""
	}
	if filepath.Base(filepath.Dir(root)) == "snapshots" && within(target, filepath.Join(filepath.Dir(filepath.Dir(root)), "blobs")) {
		return true, "" // a Hugging Face cache snapshot links to its repository's blobs
	}
	return false, "a link to " + target + ", outside the source directory"
}
