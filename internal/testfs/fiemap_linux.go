package testfs

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SharedBytes counts the bytes of path's first 64 extents that the file system marks shared
// with another file (FIEMAP_EXTENT_SHARED: a clone's blocks).
func SharedBytes(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const maxExtents = 64
	type extent struct {
		logical, physical, length uint64
		_                         [2]uint64
		flags                     uint32
		_                         [3]uint32
	}
	var m struct { // struct fiemap, then its extents
		start, length                  uint64
		flags, mapped, count, reserved uint32
		extents                        [maxExtents]extent
	}
	m.length, m.count = ^uint64(0), maxExtents
	const fsIocFiemap, extentShared = 0xC020660B, 0x2000
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&m))); e != 0 {
		t.Fatalf("FIEMAP %s: %v", path, e)
	}
	var n int64
	for _, x := range m.extents[:m.mapped] {
		if x.flags&extentShared != 0 {
			n += int64(x.length)
		}
	}
	return n
}
