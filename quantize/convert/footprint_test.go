package convert_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pdq/quantize/convert"
)

// The footprint of a decode format is the set of non-test Go files outside kernels/ that name
// it. A file names a format when its text holds the format's name (convert.DecodeFormats: nvfp4,
// mxfp4, w4afp8), compared without regard to case, anywhere: in an identifier (SchemeNVFP4,
// srcVLLMNVFP4MoE), a string ("nvfp4-pack-quantized") or a comment ("NVFP4 16"). Nothing else
// counts as not naming it: a file that mentions the format only in prose still knows of it.
//
// The kernels are left out: a format's scalar loops and their SIMD versions are its own files
// by construction. So are the files of the separate feature that reads already-quantized
// sources of a format (sourceLayouts): they describe what other tools wrote, not what pdq
// writes, and docs/ARCHITECTURE.md lists them.

// maxFootprint is the most non-test files outside kernels/ a decode format may name.
const maxFootprint = 5

// sourceLayouts are the files of the "source layouts" feature: reading sources already
// quantized to a format (and passing them through). docs/ARCHITECTURE.md names them.
var sourceLayouts = []string{
	"quantize/convert/packedsrc.go",
	"quantize/convert/enc_passed.go",
	"quantize/ctsource.go",
	"quantize/rules/layout.go",
	"synth/packed.go",
}

// footprint returns, per decode format other than INT4, the files (slash paths from the
// repository root) that name it, sorted.
func footprint(t *testing.T) map[convert.DecodeFormat][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	out := map[convert.DecodeFormat][]string{}
	var formats []convert.DecodeFormat
	for _, f := range convert.DecodeFormats {
		if f != convert.DecodeInt4 {
			formats = append(formats, f)
			out[f] = nil
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "kernels") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || slices.Contains(sourceLayouts, rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b = bytes.ToLower(b)
		for _, f := range formats {
			if bytes.Contains(b, []byte(strings.ToLower(string(f)))) {
				out[f] = append(out[f], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range out {
		slices.Sort(files)
	}
	return out
}

// TestFormatFootprint: every decode format beyond INT4 is named by at most maxFootprint non-test
// files outside kernels/ and the source layouts, the claim docs/ARCHITECTURE.md ("Adding a
// format") makes. It prints each format's files.
func TestFormatFootprint(t *testing.T) {
	fp := footprint(t)
	if len(fp) == 0 {
		t.Fatal("no decode format beyond INT4 registered")
	}
	for _, f := range convert.DecodeFormats {
		files, ok := fp[f]
		if !ok {
			continue
		}
		t.Logf("%s: %d files: %s", f, len(files), strings.Join(files, " "))
		if len(files) == 0 {
			t.Errorf("%s: no file names it: the rule of footprint no longer finds the format", f)
		}
		if len(files) > maxFootprint {
			t.Errorf("%s is named by %d non-test files outside kernels/ (at most %d): %s", f, len(files), maxFootprint, strings.Join(files, " "))
		}
	}
}

// TestFormatFootprintDocumented: docs/ARCHITECTURE.md names every file of NVFP4's footprint
// (its walk-through of adding a format) and every source-layout file the count leaves out.
func TestFormatFootprintDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Adding a format")
	if !ok {
		t.Fatal(`docs/ARCHITECTURE.md has no "## Adding a format" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	for _, f := range append(footprint(t)[convert.DecodeNVFP4], sourceLayouts...) {
		if !strings.Contains(section, "`"+f+"`") {
			t.Errorf("docs/ARCHITECTURE.md, Adding a format: does not name `%s`", f)
		}
	}
}
