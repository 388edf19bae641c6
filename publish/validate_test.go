package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Publish refuses, before sending anything, what pull would refuse; what it accepts pulls back.
func TestPublishValidatesLikePull(t *testing.T) {
	long := strings.Repeat("n", 255)
	deep := strings.Repeat(strings.Repeat("d", 200)+"/", 5) + "f"
	for _, c := range []struct {
		name     string
		files    []string
		compress bool
		ok       bool
	}{
		{"compressed name of another file", []string{"m.safetensors", "m.safetensors.zipnn"}, true, false},
		{"the same without --compress", []string{"m.safetensors", "m.safetensors.zipnn"}, false, true},
		{"a 255-byte name", []string{long}, false, true},
		{"a 255-byte name with --compress", []string{long[:255-len(".safetensors")] + ".safetensors"}, true, false},
		{"a path over the key limit", []string{deep}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			for _, f := range c.files {
				p := filepath.Join(src, filepath.FromSlash(f))
				os.MkdirAll(filepath.Dir(p), 0o755)
				data := []byte("plain bytes\n")
				if strings.HasSuffix(f, ".safetensors") {
					data = safetensorsBytes(map[string]tensor{"w": {"BF16", bf16Bytes(1<<16, 3)}})
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Skipf("this file system refuses the name: %v", err)
				}
			}
			root := t.TempDir()
			opts := quiet()
			opts.Compress = c.compress
			_, err := Publish(context.Background(), localStore(t, root), src, opts)
			if !c.ok {
				if !errors.Is(err, ErrInvalidVersion) {
					t.Fatalf("Publish = %v, want ErrInvalidVersion", err)
				}
				if ents, _ := os.ReadDir(root); len(ents) != 0 {
					t.Fatalf("a refused publish stored %v", ents)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			if _, err := Pull(context.Background(), localStore(t, root), out, PullOptions{Log: discardLog}); err != nil {
				t.Fatalf("pull of what publish accepted: %v", err)
			}
			sameTree(t, src, out)
		})
	}
}
