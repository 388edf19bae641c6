package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pdq/internal/fsutil"
)

// openWithin runs Open and fails the test if it has not returned in a minute (a FIFO opened for
// reading blocks until a writer comes, which none does here).
func openWithin(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ck, err := Open(path)
		if err == nil {
			ck.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("Open(%s) still blocked after a minute", path)
		return nil
	}
}

func TestOpenRefusesFIFOs(t *testing.T) {
	base := t.TempDir()
	writeFile(t, base, "s1.safetensors", u8Specs("a", 2), nil, fill(u8Specs("a", 2)))
	cases := []struct {
		name  string
		setup func(dir string) string // returns the path to open
		want  error
	}{
		{"shard named directly", func(dir string) string {
			return mkfifo(t, filepath.Join(dir, "f.safetensors"))
		}, fsutil.ErrNotRegular},
		{"shard named by the index", func(dir string) string {
			link(t, base, dir, "s1.safetensors")
			mkfifo(t, filepath.Join(dir, "f.safetensors"))
			writeIndexJSON(t, dir, `{"weight_map": {"a0": "s1.safetensors", "b0": "f.safetensors"}}`)
			return dir
		}, fsutil.ErrNotRegular},
		{"index", func(dir string) string {
			link(t, base, dir, "s1.safetensors")
			mkfifo(t, filepath.Join(dir, IndexFileName))
			return dir
		}, fsutil.ErrNotRegular},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := openWithin(t, c.setup(t.TempDir()))
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "FIFO") {
				t.Fatalf("Open = %v, want %v naming a FIFO", err, c.want)
			}
		})
	}
}

func TestIndexSizeCapped(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s1.safetensors", u8Specs("a", 2), nil, fill(u8Specs("a", 2)))
	// A valid index padded with whitespace to one byte over the limit: refused by size alone.
	body := `{"weight_map": {"a0": "s1.safetensors"}}`
	writeIndexJSON(t, dir, body+strings.Repeat(" ", MaxIndexSize+1-len(body)))
	_, err := Open(dir)
	if !errors.Is(err, fsutil.ErrFileTooLarge) || !errors.Is(err, ErrInvalidIndex) || !strings.Contains(err.Error(), "67108864") {
		t.Fatalf("Open = %v, want fsutil.ErrFileTooLarge and ErrInvalidIndex naming the limit", err)
	}
	writeIndexJSON(t, dir, body+strings.Repeat(" ", MaxIndexSize-len(body)))
	ck, err := Open(dir)
	if err != nil {
		t.Fatalf("index of exactly the limit: %v", err)
	}
	ck.Close()
}

func mkfifo(t *testing.T, p string) string {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return p
}

func link(t *testing.T, from, to, name string) {
	t.Helper()
	if err := os.Link(filepath.Join(from, name), filepath.Join(to, name)); err != nil {
		t.Fatal(err)
	}
}

func writeIndexJSON(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, IndexFileName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
