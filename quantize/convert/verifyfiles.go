package convert

import (
	"errors"
	"os"
	"strings"

	"pdq/safetensors"
)

// ErrNotOutput: the directory verify was given as an output is not one a conversion wrote.
var ErrNotOutput = errors.New("not an output of pdq convert")

// verifyFiles flags every entry of the output directory that a conversion does not write there:
// its shards, the index, config.json and the side files copied from the source. A nested
// conversion's outputs, its journal or report, or any stray file would otherwise be published
// with the output as if it belonged to it.
func verifyFiles(v *VerifyResult, src, out *safetensors.Checkpoint) {
	ents, err := os.ReadDir(out.Dir)
	if err != nil {
		v.problem("%s: %v", out.Dir, err)
		return
	}
	allowed := map[string]bool{safetensors.IndexFileName: true, "config.json": true}
	for _, s := range out.Shards {
		allowed[s.Name] = true
	}
	for _, e := range ents {
		name := e.Name()
		if allowed[name] {
			continue
		}
		if !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".safetensors") {
			if ok, _ := sideFileAllowed(src.Dir, name); ok {
				continue // a side file of the source (tokenizer, generation_config.json, ...)
			}
		}
		kind := "file"
		if e.IsDir() {
			kind = "directory"
		}
		v.problem("%s %q does not belong to the output (no conversion writes it there)", kind, name)
	}
}
