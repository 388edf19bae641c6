package publish

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"pdq/publish/store"
)

// The top folder of a conversion (prefill/ and decode/, the journal) is refused before anything
// is sent, with a message naming what makes it one and the folders to publish instead.
func TestPublishRefusesConversionTop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"both outputs and the journal", []string{"prefill/config.json", "decode/config.json", ".pdq-journal.json", "report.json"},
			[]string{"prefill/", "decode/", ".pdq-journal.json"}},
		{"decode only", []string{"decode/config.json", "decode/model.safetensors", "report.json"}, []string{"decode/"}},
		{"a part's journal", []string{".pdq-journal.part-0001-of-0004.json", "x.safetensors"}, []string{".pdq-journal.part-0001-of-0004.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			root := filepath.Join(t.TempDir(), "v1")
			_, err := Publish(context.Background(), localStore(t, root), dir, quiet())
			if !errors.Is(err, ErrConversionTop) {
				t.Fatalf("publish of %v: %v, want ErrConversionTop", tc.files, err)
			}
			for _, w := range append(tc.want, filepath.Join(dir, "decode")) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not name %s", err, w)
				}
			}
			if ents, _ := os.ReadDir(root); len(ents) > 1 { // the store's own .pdq folder at most
				t.Errorf("the refused publish wrote %v", ents)
			}
		})
	}
}

// failStore fails every write with err, counting the tries.
type failStore struct {
	store.Store
	err   error
	tries atomic.Int32
}

func (f *failStore) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts store.PutOptions) error {
	if key == ManifestKey {
		return f.Store.Put(ctx, key, r, size, opts)
	}
	f.tries.Add(1)
	return f.err
}

func (f *failStore) UploadPart(ctx context.Context, key, id string, num int32, r io.ReadSeeker, size int64, crc uint32) (store.Part, error) {
	f.tries.Add(1)
	return store.Part{}, f.err
}

// An error that would only come again (a read-only or full file system behind the local store,
// a server that stopped answering) is not retried: one try per file, no warning about trying once
// more; a passing one still is, with one warning.
func TestPublishPermanentErrorNotRetried(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err   error
		tries int32
		warns int
	}{
		{&fs.PathError{Op: "write", Path: "/store/.pdq/tmp/x", Err: syscall.EROFS}, 1, 0},
		{&fs.PathError{Op: "write", Path: "/store/.pdq/tmp/x", Err: syscall.ENOSPC}, 1, 0},
		{&fs.PathError{Op: "open", Path: "/store/.pdq/tmp/x", Err: syscall.EACCES}, 1, 0},
		{store.ErrStalled, 1, 0},
		{errInjected, 2, 1},
	} {
		var logBuf bytes.Buffer
		opts := quiet()
		opts.Log = slog.New(slog.NewTextHandler(&logBuf, nil))
		fs := &failStore{Store: localStore(t, filepath.Join(t.TempDir(), "v1")), err: tc.err}
		_, err := Publish(context.Background(), fs, src, opts)
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: publish returned %v", tc.err, err)
		}
		if got := fs.tries.Load(); got != tc.tries {
			t.Errorf("%v: tried %d times, want %d", tc.err, got, tc.tries)
		}
		if got := strings.Count(logBuf.String(), "level=WARN"); got != tc.warns {
			t.Errorf("%v: %d warnings, want %d:\n%s", tc.err, got, tc.warns, logBuf.String())
		}
	}
}
