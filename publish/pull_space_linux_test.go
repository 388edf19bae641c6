package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pdq/internal/testfs"
	"pdq/publish/store/localstore"
)

// fill writes a file in dir until its file system is full.
func fill(t *testing.T, dir string) {
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// A pull that cannot fit is refused before anything is downloaded, with the bytes needed and
// free; one that meets a full disk on the way (here filled behind its back) says no space, also
// while restoring a compressed file (not "does not match the manifest"), and leaves nothing
// under a final name and no working folder.
func TestPullFullDisk(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1) // about 9 MiB
	plain := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), plain, src, quiet()); err != nil {
		t.Fatal(err)
	}
	packed := localStore(t, t.TempDir())
	copts := quiet()
	copts.Compress = true
	if _, err := Publish(context.Background(), packed, src, copts); err != nil {
		t.Fatal(err)
	}

	t.Run("refused up front", func(t *testing.T) {
		fs := testfs.Tmpfs(t, "4m")
		out := filepath.Join(fs, "out")
		_, err := Pull(context.Background(), plain, out, PullOptions{Log: discardLog})
		if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "MiB free") || !strings.Contains(err.Error(), "needs") {
			t.Fatalf("pull into 4 MiB: %v, want ErrNoSpace with the bytes needed and free", err)
		}
		if _, err := os.Lstat(out); !os.IsNotExist(err) {
			t.Errorf("the refused pull left %s: %v", out, err)
		}
	})
	for _, tc := range []struct {
		name, key, want string // the object whose last range fills the disk; the error's words
		st              *localstore.Local
	}{
		{"plain", "model-00001-of-00002.safetensors", "no space left on device", plain},
		{"compressed, while restoring", "model-00002-of-00002.safetensors.zipnn", "restoring", packed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := testfs.Tmpfs(t, "64m")
			out := filepath.Join(fs, "out")
			m, _, err := ReadManifest(context.Background(), tc.st)
			if err != nil {
				t.Fatal(err)
			}
			last := -1
			for _, f := range m.Files {
				if strings.HasSuffix(f.Key, "/"+tc.key) {
					last = int((f.StoredSize - 1) >> 20)
				}
			}
			if last < 0 {
				t.Fatalf("no object %s in %+v", tc.key, m.Files)
			}
			filled := false
			opts := PullOptions{PartSize: 1 << 20, Parallel: 1, Log: discardLog, OnRange: func(key string, i int) {
				if !filled && strings.HasSuffix(key, "/"+tc.key) && i == last {
					fill(t, fs)
					filled = true
				}
			}}
			_, err = Pull(context.Background(), tc.st, out, opts)
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pull into a disk filled on the way: %v, want ENOSPC", err)
			}
			if names := finalNames(t, out); len(names) != 0 {
				t.Errorf("a pull into a full disk left %v under final names", names)
			}
			if _, err := os.Lstat(filepath.Join(out, pullState)); !os.IsNotExist(err) {
				t.Errorf("the full disk still holds %s: %v", pullState, err)
			}
		})
	}
}
