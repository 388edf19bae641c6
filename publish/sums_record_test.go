package publish

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"pdq/publish/store"
)

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := listFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		n += f.size
	}
	return n
}

// TestSumsRecord: with a sums record, a second publish of the same files reads none of them to
// hash them and publishes the same manifest; a file rewritten (same size, other bytes) is hashed
// again, and only it.
func TestSumsRecord(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no status-change time: sums are never trusted")
	}
	src := t.TempDir()
	writeCheckpoint(t, src, 2)
	opts := quiet()
	opts.SumsRecord = filepath.Join(t.TempDir(), "sums.json")
	total := dirSize(t, src)

	first := roundTrip(t, localStore(t, filepath.Join(t.TempDir(), "v1")), src, opts)
	if first.BytesHashed != total {
		t.Fatalf("first publish hashed %d bytes of %d", first.BytesHashed, total)
	}
	second := roundTrip(t, localStore(t, filepath.Join(t.TempDir(), "v2")), src, opts)
	if second.BytesHashed != 0 {
		t.Fatalf("second publish of unchanged files hashed %d bytes", second.BytesHashed)
	}
	if second.Manifest.ContentSHA256 != first.Manifest.ContentSHA256 {
		t.Fatal("the recorded sums gave another content hash")
	}

	name := "model-00002-of-00002.safetensors"
	p := filepath.Join(src, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	third := roundTrip(t, localStore(t, filepath.Join(t.TempDir(), "v3")), src, opts)
	if third.BytesHashed != int64(len(b)) {
		t.Fatalf("after rewriting %s (%d bytes) the publish hashed %d bytes", name, len(b), third.BytesHashed)
	}
	if third.Manifest.ContentSHA256 == first.Manifest.ContentSHA256 {
		t.Fatal("a changed file kept the old content hash")
	}
}

// TestSumsRecordResume: the rerun of a publish that failed after hashing reads nothing to hash
// and sends only what the first run did not store.
func TestSumsRecordResume(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	opts := quiet()
	opts.SumsRecord = filepath.Join(t.TempDir(), "sums.json")
	dst := localStore(t, filepath.Join(t.TempDir(), "v1"))
	failing := &hookStore{Store: dst, failPut: map[string]int{ManifestKey: 1}}
	if _, err := Publish(context.Background(), failing, src, opts); !errors.Is(err, errInjected) {
		t.Fatalf("first publish: %v, want the injected failure", err)
	}
	res, err := Publish(context.Background(), dst, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesHashed != 0 {
		t.Fatalf("rerun hashed %d bytes", res.BytesHashed)
	}
	for _, f := range res.Files {
		if f.Action != "skipped" {
			t.Fatalf("rerun: %s was %s, want skipped", f.Path, f.Action)
		}
	}
}

// TestSumsRecordWrongCRC: a record whose sums no longer describe the bytes (a file changed
// behind an unchanged identity) makes the upload fail on the store's checksum check; nothing is
// published.
func TestSumsRecordWrongCRC(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no status-change time: sums are never trusted")
	}
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	opts := quiet()
	opts.SumsRecord = filepath.Join(t.TempDir(), "sums.json")
	if _, err := Publish(context.Background(), localStore(t, filepath.Join(t.TempDir(), "v1")), src, opts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(opts.SumsRecord)
	if err != nil {
		t.Fatal(err)
	}
	var rec sumsRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	e := rec.Files["config.json"]
	e.CRC32C[0] ^= 1
	rec.Files["config.json"] = e
	if b, err = json.Marshal(&rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opts.SumsRecord, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st := localStore(t, filepath.Join(t.TempDir(), "v2"))
	if _, err := Publish(context.Background(), st, src, opts); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("publish with a wrong recorded CRC: %v, want store.ErrChecksum", err)
	}
	if _, err := st.Stat(context.Background(), ManifestKey); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("a manifest was written: %v", err)
	}
}
