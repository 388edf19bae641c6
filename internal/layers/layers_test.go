package layers

import (
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
	"pdq/kernels":     2, "pdq/quantize/rules": 2, "pdq/internal/synth": 2, "pdq/publish/zipnn": 2,
	"pdq/publish/store": 2,
	"pdq/quantize":      3, "pdq/quantize/qref": 3, "pdq/quantize/report": 3, "pdq/publish": 3,
	"pdq/calib": 4, "pdq/reportview": 4,
	"pdq/quantize/convert": 5, "pdq/kernels/cuda/gptqparity": 5,
	"pdq/serving": 6,
	"pdq/cmd":     9, "pdq/tools": 9, "pdq/scripts": 9,
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
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
			to, toKey, ok := layerOf(imp)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no layer", path, imp)
			case strings.HasPrefix(imp, pkg+"/") || toKey == fromKey:
				// its own subpackages, or the same package family
			case to >= from:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", path, from, imp, to)
			}
			if strings.HasPrefix(pkg, "pdq/publish") && strings.HasPrefix(imp, "pdq/quantize") {
				t.Errorf("%s: publish imports %s; it must stay beside the conversion, never on it", path, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
