//go:build unix

package fsutil

import (
	"path/filepath"
	"testing"
)

// TestFreeBytes: the free space of a directory not made yet is its nearest parent's.
func TestFreeBytes(t *testing.T) {
	dir := t.TempDir()
	a, err := FreeBytes(dir)
	if err != nil || a <= 0 {
		t.Fatalf("FreeBytes(%s) = %d, %v", dir, a, err)
	}
	if b, err := FreeBytes(filepath.Join(dir, "not", "yet")); err != nil || b <= 0 {
		t.Fatalf("FreeBytes of a path not made yet = %d, %v", b, err)
	}
}
