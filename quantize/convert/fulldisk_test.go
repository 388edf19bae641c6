package convert_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pdq/internal/fsutil"
	"pdq/internal/testfs"
	"pdq/quantize"
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
	checkNoPartial(t, out)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err != nil {
		t.Fatalf("resume after freeing space: %v", err)
	}
	sameFiles(t, "resumed after a full disk vs uninterrupted", outputFiles(t, ref), outputFiles(t, out))
}

// envDirectChild marks the child process of TestFullDiskDirect.
const envDirectChild = "PDQ_CONVERT_TEST_DIRECT_CHILD"

// TestFullDiskDirect is TestFullDisk with direct writes, background ones included: on an ext2
// file system (direct I/O taken, preallocation refused, so the disk fills up in the middle of
// the writes themselves, whichever way they go), in a child process with PDQ_DIRECT_IO=1 so
// that every large write goes around the page cache. For both kinds of source (the decode and
// prefill writers, and the prefill copy of an FP8 one) and several amounts of room left: the
// run fails with ENOSPC, leaves no temporary file and no descriptor open on the file system, and
// after space is freed resumes to the bytes of a conversion that had room.
func TestFullDiskDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts an ext2 image")
	}
	if os.Getenv(envDirectChild) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskDirect$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envDirectChild+"=1", "PDQ_DIRECT_IO=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if bytes.Contains(out, []byte("--- SKIP: TestFullDiskDirect")) {
			t.Skipf("child skipped:\n%s", out)
		}
		return
	}
	srcs := bandSources(t)
	o := convert.Options{GroupSize: 32, Method: quantize.MethodRTN, MaxShardSize: 4 << 20}
	for _, name := range []string{"bf16", "fp8block"} {
		src := srcs[name]
		ref := filepath.Join(t.TempDir(), "ref")
		convertTo(t, src, ref, o, convert.RunOptions{Workers: 2})
		var total int64
		for _, b := range readTree(t, ref) {
			total += int64(len(b))
		}
		for _, pct := range []int64{10, 50, 90} {
			t.Run(fmt.Sprintf("%s/%d%%", name, pct), func(t *testing.T) {
				fs := testfs.Ext2(t, 4*total)
				var st syscall.Statfs_t
				if err := syscall.Statfs(fs, &st); err != nil {
					t.Fatal(err)
				}
				ballast := filepath.Join(fs, "ballast")
				if err := os.WriteFile(ballast, make([]byte, int64(st.Bavail)*int64(st.Bsize)-total*pct/100), 0o644); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(fs, "out")
				direct := fsutil.DirectBytes()
				_, err := runPlan(plan(t, src, o), out, convert.RunOptions{Workers: 2})
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("conversion on a full disk: %v, want ENOSPC", err)
				}
				t.Logf("full disk: %v", err)
				checkUnfinished(t, out)
				checkNoPartial(t, out)
				if open := testfs.OpenUnder(t, fs+"/"); len(open) > 0 {
					t.Errorf("descriptors left open after the failed run: %v", open)
				}
				if err := os.Remove(ballast); err != nil {
					t.Fatal(err)
				}
				if _, err := runPlan(plan(t, src, o), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err != nil {
					t.Fatalf("resume after freeing space: %v", err)
				}
				if fsutil.DirectBytes() == direct {
					t.Error("nothing was written directly")
				}
				sameFiles(t, "resumed after a full disk vs uninterrupted", outputFiles(t, ref), outputFiles(t, out))
			})
		}
	}
}
