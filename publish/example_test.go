package publish_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"pdq/publish"
)

// Publish a directory to a store (here a local one; s3://bucket/prefix works the same), verify
// every stored byte against the manifest, and pull it back.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "decode")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"model_type": "glm4_moe"}`), 0o644)
	os.WriteFile(filepath.Join(src, "model.safetensors"), []byte("not really weights"), 0o644)

	st, err := publish.OpenStore(ctx, filepath.Join(tmp, "store", "glm", "v1"), publish.StoreOptions{})
	if err != nil {
		panic(err)
	}
	res, err := publish.Publish(ctx, st, src, publish.Options{})
	if err != nil {
		panic(err)
	}
	v, err := publish.Verify(ctx, st, publish.VerifyOptions{Deep: true})
	if err != nil {
		panic(err)
	}
	got, err := publish.Pull(ctx, st, filepath.Join(tmp, "pulled"), publish.PullOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.Files), "files published; verified:", v.OK, "; pulled", got.Size, "bytes")
	// Output: 2 files published; verified: true ; pulled 44 bytes
}
