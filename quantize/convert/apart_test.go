package convert_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
)

// TestOutputOverlappingSourceRefused: an output directory that holds the source, or lies inside
// a source directory, is refused before anything is touched, with --force too; the source stays
// whole. (Before, convert X/prefill --out X --force deleted its own source.)
func TestOutputOverlappingSourceRefused(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "prefill")
	if err := os.CopyFS(src, os.DirFS(deepseekSource(t))); err != nil {
		t.Fatal(err)
	}
	before := readTree(t, src)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, out string }{
		{"out holds the source", base},
		{"out is the source", src},
		{"out inside the source", filepath.Join(src, "converted")},
		{"out holds the source through a symlink", link},
		{"out inside the source through a symlink", filepath.Join(link, "prefill", "new")},
	} {
		for _, force := range []bool{false, true} {
			_, err := runPlan(plan(t, src, convert.Options{}), tc.out, convert.RunOptions{Existing: map[bool]convert.Existing{true: convert.Restart}[force], Workers: 1})
			if !errors.Is(err, convert.ErrOverlapsSource) {
				t.Errorf("%s (force %v): error %v, want ErrOverlapsSource", tc.name, force, err)
			}
		}
	}
	sameFiles(t, "source after refused runs", before, readTree(t, src))
	if _, err := os.Stat(filepath.Join(src, "converted")); !os.IsNotExist(err) {
		t.Errorf("a refused run created its output directory inside the source: %v", err)
	}
	// A sibling directory is fine.
	if _, err := runPlan(plan(t, src, convert.Options{MaxShardSize: 1 << 20}), filepath.Join(base, "out"), convert.RunOptions{Workers: 1}); err != nil {
		t.Fatalf("output beside the source: %v", err)
	}
}
