package convert_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pdq/internal/testfs"
	"pdq/quantize/convert"
)

// TestFullDisk runs out of space in the middle of a conversion: the error names the file, no
// temporary file stays behind, nothing looks finished; after space is freed, the same run resumes
// and ends byte-identical to a conversion that had room.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	src := deepseekSource(t)
	ref := filepath.Join(t.TempDir(), "ref")
	convertTo(t, src, ref, smallOptions, convert.RunOptions{Workers: 2})
	var total int64
	for _, b := range readTree(t, ref) {
		total += int64(len(b))
	}

	fs := testfs.Tmpfs(t, "16m")
	// Leave about half of what the conversion needs.
	ballast := filepath.Join(fs, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 16<<20-total/2), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(fs, "out")
	_, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("conversion on a full disk: %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), fs) && !strings.Contains(err.Error(), ".safetensors") {
		t.Errorf("error does not name the file: %v", err)
	}
	// Shards reserve their whole size when created, so none runs out in the middle of its writes;
	// the journal's appends reserve nothing, and when the shards created so far leave less than
	// a page, a journal line is what meets the full disk first.
	if !strings.Contains(err.Error(), "preallocate") && !strings.Contains(err.Error(), "convert: journal:") {
		t.Errorf("the disk filled up during a shard's writes, not when a shard was created and preallocated: %v", err)
	}
	t.Logf("full disk: %v", err)
	checkUnfinished(t, out)
	filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".partial") {
			t.Errorf("temporary file left behind: %s", path)
		}
		return nil
	})

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err != nil {
		t.Fatalf("resume after freeing space: %v", err)
	}
	sameFiles(t, "resumed after a full disk vs uninterrupted", outputFiles(t, ref), outputFiles(t, out))
}
