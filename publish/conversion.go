package publish

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// convertOutputs are the checkpoints pdq convert writes under its output folder.
var convertOutputs = []string{"prefill", "decode"}

// checkNotConversionTop refuses the top folder of a conversion: it holds pdq convert's journal
// or a prefill/ or decode/ checkpoint (a folder with a config.json), and published as one
// version it would mix both checkpoints and the journal, which no engine loads.
func checkNotConversionTop(dir string) error {
	var found []string
	for _, name := range convertOutputs {
		if fi, err := os.Stat(filepath.Join(dir, name, "config.json")); err == nil && fi.Mode().IsRegular() {
			found = append(found, name+"/")
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, ".pdq-journal") && strings.HasSuffix(n, ".json") {
			found = append(found, quote(n))
		}
	}
	if len(found) == 0 {
		return nil
	}
	var each []string
	for _, name := range convertOutputs {
		each = append(each, quote(filepath.Join(dir, name)))
	}
	return fmt.Errorf("%w: %s holds %s; publish each checkpoint as its own version (%s), and the report next to them goes with each",
		ErrConversionTop, quote(dir), strings.Join(found, ", "), strings.Join(each, ", "))
}
