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
	return loopMount(t, "xfs", "xfsprogs", max(size, XFSSize), "-q", "-m", "reflink=1")
}

// Ext2 mounts a fresh ext2 file system of size bytes from a sparse image in a temporary
// directory and returns the path of its root, or skips the test where that cannot be done (not
// root, no mkfs.ext2, no loop device). It takes direct I/O but no preallocation (its files map
// blocks without extents, so fallocate is refused): files are sparse, and a full disk meets the
// writes themselves, direct ones included.
func Ext2(t testing.TB, size int64) string {
	t.Helper()
	return loopMount(t, "ext2", "e2fsprogs", size, "-q", "-F", "-m", "0")
}

// loopMount makes a sparse image of size bytes in a temporary directory, formats it with
// mkfs.<fs> and the flags given (Debian package pkg), mounts it through a loop device and
// returns the mount's root, unmounted when the test ends; it skips the test where that cannot
// be done.
func loopMount(t testing.TB, fs, pkg string, size int64, flags ...string) string {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs." + fs)
	if err != nil {
		t.Skipf("mkfs.%s not installed (Debian: %s)", fs, pkg)
	}
	img := filepath.Join(t.TempDir(), fs+".img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, append(flags, img)...).CombinedOutput(); err != nil {
		t.Skipf("mkfs.%s: %v %s", fs, err, out)
	}
	dir := mountPoint(t, fs)
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount an %s image (needs root and a loop device): %v %s", fs, err, out)
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
