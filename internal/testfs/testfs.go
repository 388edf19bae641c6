// Package testfs mounts small file systems for tests that need a kind the machine's own
// directories may not be: a tmpfs to fill, an XFS whose files can be cloned, an ext2 whose
// files cannot be preallocated. Mounting needs root (CI runs as root and installs xfsprogs);
// elsewhere the tests that need one skip.
package testfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Tmpfs mounts a tmpfs of the given size ("16m") in a temporary directory for the test and
// returns its path, or skips the test when this process may not mount.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := mountPoint(t, "tmpfs")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// XFSSize is the smallest XFS mkfs.xfs makes (300 MiB); its image file is sparse.
const XFSSize = 300 << 20

// XFS mounts a fresh XFS of size bytes, with reflinks (clones) on, from a sparse image in a
// temporary directory, and returns the path of its root; it skips the test where that cannot be
// done (not root, no mkfs.xfs, no loop device, no XFS in the kernel).
func XFS(t testing.TB, size int64) string {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		t.Skip("mkfs.xfs not installed (Debian: xfsprogs)")
	}
	img := filepath.Join(t.TempDir(), "xfs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, max(size, XFSSize)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.xfs: %v %s", err, out)
	}
	dir := mountPoint(t, "xfs")
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount an XFS image (needs root and a loop device): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// Ext2 mounts a fresh ext2 file system of size bytes from a sparse image in a temporary
// directory and returns the path of its root, or skips the test where that cannot be done (not
// root, no mkfs.ext2, no loop device). It takes direct I/O but no preallocation (its files map
// blocks without extents, so fallocate is refused): files are sparse, and a full disk meets the
// writes themselves, direct ones included.
func Ext2(t testing.TB, size int64) string {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.ext2")
	if err != nil {
		t.Skip("mkfs.ext2 not installed (Debian: e2fsprogs)")
	}
	img := filepath.Join(t.TempDir(), "ext2.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext2: %v %s", err, out)
	}
	dir := mountPoint(t, "ext2")
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount an ext2 image (needs root and a loop device): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// mountPoint makes an empty directory for a mount, removed with the test's temporary files
// after the cleanup that unmounts it (cleanups run last first).
func mountPoint(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// OpenUnder returns this process's descriptors open on files whose paths start with prefix
// (removed files too, which the kernel names with " (deleted)"), as "fd -> path"; it skips the
// test where /proc/self/fd cannot be read.
func OpenUnder(t testing.TB, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var open []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, prefix) {
			open = append(open, e.Name()+" -> "+l)
		}
	}
	return open
}
