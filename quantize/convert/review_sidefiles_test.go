package convert_test

import (
	"os"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
)

// TestReviewSymlinkedSideFiles: a Hugging Face cache snapshot holds symbolic links to its blobs.
// The tokenizer and other side files reached through such links are copied into both outputs
// (as regular files), not silently left out.
func TestReviewSymlinkedSideFiles(t *testing.T) {
	src := writeCheckpoint(t, []raw{
		bf16Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 1, 64, 128),
		bf16Tensor("model.layers.1.self_attn.q_proj.weight", 2, 128, 128),
	}, map[string]any{"model_type": "glm4_moe"})
	blob := filepath.Join(t.TempDir(), "blob-0123")
	if err := os.WriteFile(blob, []byte(`{"version":"1.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(blob, filepath.Join(src, "tokenizer.json")); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 2})
	for _, kind := range []string{"prefill", "decode"} {
		p := filepath.Join(out, kind, "tokenizer.json")
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: tokenizer.json not copied: %v", kind, err)
			continue
		}
		if b, _ := os.ReadFile(p); !fi.Mode().IsRegular() || string(b) != `{"version":"1.0"}` {
			t.Errorf("%s/tokenizer.json: mode %v, %q", kind, fi.Mode(), b)
		}
	}
}
