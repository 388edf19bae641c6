package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRegular: a regular file opens; a FIFO (without blocking), a directory and a missing
// file are refused, the first two with ErrNotRegular naming what they are.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenRegular(file)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fifo := filepath.Join(dir, "p")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for path, kind := range map[string]string{fifo: "FIFO", dir: "directory"} {
		if _, err := OpenRegular(path); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) {
			t.Errorf("OpenRegular(%s) = %v, want ErrNotRegular naming a %s", path, err, kind)
		}
	}
	if _, err := OpenRegular(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestReadRegularFileLimit: a file of exactly the limit is read, one byte more is refused.
func TestReadRegularFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegularFile(p, 5); err != nil || string(b) != "12345" {
		t.Fatalf("at the limit: %q, %v", b, err)
	}
	if _, err := ReadRegularFile(p, 4); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("over the limit: %v, want ErrFileTooLarge", err)
	}
}
