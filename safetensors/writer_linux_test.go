package safetensors

import (
	"path/filepath"
	"testing"

	"pdq/internal/testfs"
)

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
	if open := testfs.OpenUnder(t, filepath.Dir(path)+"/"); len(open) > 0 {
		t.Errorf("failed Create left descriptors open: %v", open)
	}
}
