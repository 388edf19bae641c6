package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"pdq/safetensors"
)

// ErrOverlapsSource: the output directory is the source, inside it, or holds it. Refused before
// anything is created or removed, even with Restart: cleaning such an output would delete the
// source.
var ErrOverlapsSource = errors.New("output directory overlaps the source")

// checkApart refuses an output directory that holds the source (its directory, index or a
// shard) or, for a source given as a directory, lies inside it; paths are compared absolute
// with symbolic links resolved.
func checkApart(src *safetensors.Checkpoint, dir string) error {
	out, err := resolvePath(dir)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	given := []string{src.Opened, src.IndexPath}
	for _, sh := range src.Shards {
		given = append(given, sh.Path)
	}
	dirSource := false
	if st, err := os.Stat(src.Opened); err == nil && st.IsDir() {
		dirSource = true
	}
	for i, p := range given {
		if p == "" {
			continue
		}
		sp, err := resolvePath(p)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		if within(sp, out) || i == 0 && dirSource && within(out, sp) {
			return fmt.Errorf("convert: output %s and source %s: %w", dir, src.Opened, ErrOverlapsSource)
		}
	}
	return nil
}

// resolvePath returns the absolute form of p with symbolic links resolved in its longest
// existing prefix (the rest need not exist yet).
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		if cur == filepath.Dir(cur) {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// within reports whether path a is b or lies under b.
func within(a, b string) bool {
	rel, err := filepath.Rel(b, a)
	return err == nil && (rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// checkSourceUnchanged compares each source shard's size and modification time with what Open saw.
func checkSourceUnchanged(src *safetensors.Checkpoint) error {
	for _, s := range src.Shards {
		fi, err := os.Stat(s.Path)
		if err != nil {
			return fmt.Errorf("convert: %s: %w: %v", s.Name, ErrSourceChanged, err)
		}
		if fi.Size() != s.Size || !fi.ModTime().Equal(s.ModTime) {
			return fmt.Errorf("convert: %s: %w (size or modification time differs)", s.Name, ErrSourceChanged)
		}
	}
	return nil
}
