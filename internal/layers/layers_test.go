package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// layer of each package (by import path prefix, the longest match wins): a package may import
// only packages of a strictly lower layer, or its own subpackages. docs/ARCHITECTURE.md shows
// the same table.
var layer = map[string]int{
	"pdq/internal/floatcodec": 0, "pdq/internal/fsutil": 0, "pdq/internal/par": 0, "pdq/internal/layers": 0, "pdq/internal/units": 0,
	"pdq/internal/testfs": 0, "pdq/internal/termsafe": 0,
	"pdq/safetensors": 1,
	"pdq/kernels":     2, "pdq/quantize/rules": 2, "pdq/synth": 2, "pdq/publish/zipnn": 2,
	"pdq/publish/store": 2,
	"pdq/quantize":      3, "pdq/quantize/qref": 3, "pdq/quantize/report": 3, "pdq/publish": 3,
	"pdq/calib": 4, "pdq/reportview": 4,
	"pdq/quantize/convert": 5,
	"pdq/serving":          6,
	"pdq/quantize/compare": 7,
	"pdq/cmd":              9, "pdq/tools": 9, "pdq/scripts": 9,
}

// confined lists the trees that stand apart from the formats and the pipeline, with the only
// project trees their files, tests included, may import: the ground floor (internal/) imports
// nothing above it; the kernels and publish import no format or pipeline package, only the
// ground floor and their own tree.
var confined = []struct {
	tree string
	may  []string
}{
	{"pdq/internal", []string{"pdq/internal"}},
	{"pdq/kernels", []string{"pdq/internal", "pdq/kernels"}},
	{"pdq/publish", []string{"pdq/internal", "pdq/publish"}},
}

// within reports whether pkg is tree or one of its subpackages.
func within(pkg, tree string) bool { return pkg == tree || strings.HasPrefix(pkg, tree+"/") }

// confinement returns why pkg may not import imp, or "" when it may.
func confinement(pkg, imp string) string {
	for _, c := range confined {
		if !within(pkg, c.tree) {
			continue
		}
		for _, t := range c.may {
			if within(imp, t) {
				return ""
			}
		}
		return fmt.Sprintf("%s may import only %s of the project", c.tree, strings.Join(c.may, " and "))
	}
	return ""
}

func layerOf(pkg string) (int, string, bool) {
	best := ""
	for p := range layer {
		if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
			best = p
		}
	}
	return layer[best], best, best != ""
}

func TestImportsPointDown(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "deploy") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		test := strings.HasSuffix(path, "_test.go")
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := "pdq/" + filepath.ToSlash(rel)
		from, fromKey, ok := layerOf(pkg)
		if !ok {
			t.Errorf("%s: package %s has no layer (add it to the table here and in docs/ARCHITECTURE.md)", path, pkg)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			imp, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(imp, "pdq/") {
				continue
			}
			if why := confinement(pkg, imp); why != "" {
				t.Errorf("%s imports %s: %s", path, imp, why)
			}
			if test {
				continue // tests may reach up a layer for their fixtures
			}
			to, toKey, ok := layerOf(imp)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no layer", path, imp)
			case strings.HasPrefix(imp, pkg+"/") || toKey == fromKey:
				// its own subpackages, or the same package family
			case to >= from:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", path, from, imp, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConfinement: the rule TestImportsPointDown applies to the confined trees, on cases that
// would pass the layers alone.
func TestConfinement(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"pdq/kernels/cuda/host", "pdq/safetensors", false}, // a format, though a lower layer
		{"pdq/kernels/cuda/host", "pdq/kernels/cuda/parity", true},
		{"pdq/kernels", "pdq/internal/floatcodec", true},
		{"pdq/publish", "pdq/quantize/report", false},
		{"pdq/publish/store", "pdq/safetensors", false},
		{"pdq/publish", "pdq/publish/zipnn", true},
		{"pdq/internal/fsutil", "pdq/internal/par", true},
		{"pdq/internal/synth", "pdq/safetensors", false},
		{"pdq/kernelsx", "pdq/safetensors", true}, // another tree that shares the prefix
		{"pdq/calib/gptqparity", "pdq/kernels/cuda/parity", true},
	} {
		if why := confinement(c.pkg, c.imp); (why == "") != c.ok {
			t.Errorf("%s importing %s: %q, want allowed %v", c.pkg, c.imp, why, c.ok)
		}
	}
}
