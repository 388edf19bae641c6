package localstore_test

import (
	"bytes"
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"pdq/publish/store"
	"pdq/publish/store/localstore"
	"pdq/publish/store/storetest"
)

func TestLocalSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := localstore.New(filepath.Join(t.TempDir(), "root"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// An object changed behind the store's back must lose its checksum metadata.
func TestLocalMetadataFollowsContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("hello world")
	if err := s.Put(ctx, "f", bytesReader(data), int64(len(data)), store.PutOptions{Metadata: map[string]string{"sha256": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("hello WORLD"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata["sha256"] != "" {
		t.Fatalf("metadata survived a change of the object: %v", info.Metadata)
	}
}

func TestValidKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true}, {"a/b.safetensors", true}, {"a.pdq", true}, {".pdqx/y", true},
		{"", false}, {"/a", false}, {"a/", false}, {"../a", false}, {"a/..", false}, {"./a", false},
		{".pdq", false}, {".pdq/a", false}, {"a\\b", false}, {"a\x00b", false},
	} {
		if err := store.ValidKey(tc.key); (err == nil) != tc.ok {
			t.Errorf("ValidKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// TestLocalStatWritesNothing: looking at a local store (a pull from a directory someone else
// published) creates nothing in it, not even the metadata lock.
func TestLocalStatWritesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := l.Stat(context.Background(), "a"); err != nil || info.Size != 1 {
		t.Fatalf("stat: %+v %v", info, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the store holds %d entries after a Stat, want 1", len(ents))
	}
}

// Two writers uploading the same part of one upload with the same bytes (two publishes of the
// same content, one resuming the other's upload) must never make the part disappear: a
// concurrent listing always sees it, and completing with the listed parts works.
func TestLocalSamePartTwice(t *testing.T) {
	ctx := context.Background()
	s, err := localstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.CreateMultipart(ctx, "k", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("part"), 1024)
	crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	if _, err := s.UploadPart(ctx, "k", id, 1, bytesReader(data), int64(len(data)), crc); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range 300 {
			if _, err := s.UploadPart(ctx, "k", id, 1, bytesReader(data), int64(len(data)), crc); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		parts, err := s.ListParts(ctx, "k", id)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 1 {
			t.Fatalf("listing while the part is uploaded again: %d parts, want 1", len(parts))
		}
	}
	parts, err := s.ListParts(ctx, "k", id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteMultipart(ctx, "k", id, parts, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}
