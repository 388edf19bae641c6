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
