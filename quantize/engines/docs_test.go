package engines_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/engines"
)

// TestSourcesDocumented: docs/SERVING.md lists every engine file the rules cite, at the commit read.
func TestSourcesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "SERVING.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range engines.Sources() {
		row := "`" + s.Path + "` | " + s.Commit[:12] + " |"
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/SERVING.md has no row %q", row)
		}
	}
}

// TestSupportTableDocumented: docs/SERVING.md's "Decode formats and GPUs" names every scheme class
// and engine file of the format × engine × GPU table, so the table in code and the one in the
// docs do not drift apart.
func TestSupportTableDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "SERVING.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "### Decode formats and GPUs")
	if i < 0 {
		t.Fatal(`docs/SERVING.md has no "### Decode formats and GPUs"`)
	}
	doc = doc[i:]
	for _, f := range engines.SupportedFormats {
		for _, s := range engines.SupportTable(f) {
			class, _, _ := strings.Cut(s.Path, ":")
			for _, w := range strings.Fields(class) {
				if strings.HasPrefix(w, "CompressedTensors") || strings.HasPrefix(w, "_is_") {
					if w = strings.Trim(w, "(),"); !strings.Contains(doc, strings.SplitN(w, "(", 2)[0]) {
						t.Errorf("%s %s SM%d: %s is not in the section", f, s.Engine, s.MinSM, w)
					}
				}
			}
			file := s.Source[strings.LastIndexByte(s.Source, '/')+1 : strings.IndexByte(s.Source, '@')]
			if !strings.Contains(doc, file) {
				t.Errorf("%s %s SM%d: source %s is not in the section", f, s.Engine, s.MinSM, file)
			}
		}
	}
}
