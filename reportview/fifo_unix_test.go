//go:build unix

package reportview

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"pdq/internal/fsutil"
)

// TestLoadRefusesFIFO: a FIFO given as the report is refused at once, not waited on.
func TestLoadRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	if _, err := Load(path); !errors.Is(err, fsutil.ErrNotRegular) {
		t.Fatalf("Load of a FIFO: %v, want fsutil.ErrNotRegular", err)
	}
}
