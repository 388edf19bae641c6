package safetensors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openFiles returns the descriptors of this process open on path (a removed file included).
func openFiles(t *testing.T, path string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var open []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, path) {
			open = append(open, e.Name()+" -> "+l)
		}
	}
	return open
}

// TestCreateFailureClosesFiles: a Create that fails after making its temporary file (the
// whole size cannot be reserved: a full disk, or here a file larger than the file system takes)
// leaves no descriptor open on it, the one for direct writes included (an open descriptor of a
// removed file keeps its blocks, and its file system busy, until the process exits).
func TestCreateFailureClosesFiles(t *testing.T) {
	l, err := ComputeLayout([]TensorSpec{{"t", U8, []int64{1 << 60}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "huge.safetensors")
	if w, err := Create(path, l); err == nil {
		w.Abort()
		t.Skipf("%s reserved an exbibyte", filepath.Dir(path))
	}
	if open := openFiles(t, filepath.Dir(path)); len(open) > 0 {
		t.Errorf("failed Create left descriptors open: %v", open)
	}
}
