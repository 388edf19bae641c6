//go:build unix

package convert_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
)

// TestSourceConfigLinkOutside: a source config.json that links to a file outside the source is
// refused before anything is written, as tokenizer links are.
func TestSourceConfigLinkOutside(t *testing.T) {
	src := copyDir(t, deepseekSource(t))
	elsewhere := filepath.Join(t.TempDir(), "other.json")
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere, b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(src, "config.json"))
	if err := os.Symlink(elsewhere, filepath.Join(src, "config.json")); err != nil {
		t.Fatal(err)
	}
	p := plan(t, src, convert.Options{MaxShardSize: 1 << 20})
	out := filepath.Join(t.TempDir(), "out")
	if _, err := runPlan(p, out, convert.RunOptions{}); !errors.Is(err, convert.ErrLinkOutside) {
		t.Fatalf("config.json linked outside the source: %v, want ErrLinkOutside", err)
	}
	if _, err := os.Stat(filepath.Join(out, "prefill", "config.json")); err == nil {
		t.Fatal("the linked config.json was copied")
	}
}

// TestSourceFilesSwappedBeforeCopy: the FP8 source's config.json and index, copied into the
// prefill output at the end, are read with the plan's checks: a FIFO in their place is refused at
// once (no hang), another JSON is refused as a change since the plan read it; nothing finished is
// left behind.
func TestSourceFilesSwappedBeforeCopy(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		swap       func(path string) error
	}{
		{"config fifo", "config.json", func(path string) error { return syscall.Mkfifo(path, 0o644) }},
		{"config other json", "config.json", func(path string) error {
			return os.WriteFile(path, []byte(`{"model_type": "deepseek_v3", "hidden_size": 1}`), 0o644)
		}},
		{"index fifo", safetensors.IndexFileName, func(path string) error { return syscall.Mkfifo(path, 0o644) }},
		{"index other json", safetensors.IndexFileName, func(path string) error {
			return os.WriteFile(path, []byte(`{"weight_map": {}}`), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := copyDir(t, deepseekSource(t))
			p := plan(t, src, convert.Options{MaxShardSize: 1 << 20})
			path := filepath.Join(src, tc.file)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := tc.swap(path); err != nil {
				t.Skip(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			if _, err := runPlan(p, out, convert.RunOptions{Workers: 1}); !errors.Is(err, convert.ErrSourceChanged) {
				t.Fatalf("%s swapped: %v, want ErrSourceChanged", tc.file, err)
			}
			for _, f := range []string{"report.json", "prefill/" + safetensors.IndexFileName} {
				if _, err := os.Stat(filepath.Join(out, f)); err == nil {
					t.Errorf("%s written after a refused copy", f)
				}
			}
		})
	}
}
