package convert_test

import (
	"os"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
)

// TestReviewLinkModeSymlinkedShard: with --prefill-mode link, an FP8 source whose shards are
// relative symbolic links (a Hugging Face cache snapshot: ../../blobs/HASH) gets prefill shards
// that are the shard's bytes, not copies of the link that dangle in the output directory.
func TestLinkModeSymlinkedShard(t *testing.T) {
	var ts []raw
	ts = append(ts, bf16Tensor("model.embed_tokens.weight", 1, 16, 128))
	ts = append(ts, fp8Tensor("model.layers.1.self_attn.q_proj.weight", 2, 128, 128, false)...)
	ts = append(ts, fp8Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 3, 64, 128, false)...)
	real := writeCheckpoint(t, ts, fp8Config)
	root := t.TempDir()
	snap, blobs := filepath.Join(root, "snapshots", "rev"), filepath.Join(root, "blobs")
	for _, d := range []string{snap, blobs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"model.safetensors", "config.json"} {
		if err := os.Rename(filepath.Join(real, name), filepath.Join(blobs, name+".blob")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", name+".blob"), filepath.Join(snap, name)); err != nil {
			t.Skipf("symbolic links: %v", err)
		}
	}
	want, err := os.ReadFile(filepath.Join(snap, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, snap, out, convert.Options{}, convert.RunOptions{Workers: 2, PrefillMode: "link"})
	got, err := os.ReadFile(filepath.Join(out, "prefill", "model.safetensors"))
	if err != nil || string(got) != string(want) {
		t.Errorf("prefill shard: %d bytes, err %v; want the source's %d bytes", len(got), err, len(want))
	}
}

// TestSymlinkedSideFiles: in a Hugging Face cache snapshot a side file linking to the
// repository's blobs/ is copied as a regular file; a link to a file outside the source and its
// blobs is not copied; a copy never gets wider permissions than its source.
func TestSymlinkedSideFiles(t *testing.T) {
	made := writeCheckpoint(t, []raw{
		bf16Tensor("model.layers.1.mlp.experts.0.gate_proj.weight", 1, 64, 128),
		bf16Tensor("model.layers.1.self_attn.q_proj.weight", 2, 128, 128),
	}, map[string]any{"model_type": "glm4_moe"})
	repo := filepath.Join(t.TempDir(), "models--org--m")
	src := filepath.Join(repo, "snapshots", "0123abcd")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(made, src); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "blobs"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, "blobs", "blob-0123"), []byte(`{"version":"1.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../blobs/blob-0123", filepath.Join(src, "tokenizer.json")); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
	secret := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(secret, []byte("root:x"), 0o600)
	os.Symlink(secret, filepath.Join(src, "special_tokens_map.json"))
	os.WriteFile(filepath.Join(src, "private.txt"), []byte("p"), 0o600)
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
		if _, err := os.Lstat(filepath.Join(out, kind, "special_tokens_map.json")); err == nil {
			t.Errorf("%s: a link to a file outside the source was copied", kind)
		}
		if fi, err := os.Stat(filepath.Join(out, kind, "private.txt")); err != nil {
			t.Errorf("%s/private.txt not copied: %v", kind, err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s/private.txt: mode %v, want 0600 like its source", kind, fi.Mode().Perm())
		}
	}
}
