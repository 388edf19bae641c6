package publish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/publish/store"
	"pdq/publish/store/localstore"
)

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func localStore(t testing.TB, dir string) *localstore.Local {
	s, err := localstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// roundTrip publishes src to st, pulls it back and checks the copy, the manifest and verify.
func roundTrip(t *testing.T, st store.Store, src string, opts Options) *Result {
	t.Helper()
	ctx := context.Background()
	res, err := Publish(ctx, st, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pulled")
	pr, err := Pull(ctx, st, out, PullOptions{PartSize: store.MinPartSize, Parallel: 3, Log: discardLog})
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, out)
	if len(pr.Files) != len(res.Files) {
		t.Fatalf("pulled %d files, published %d", len(pr.Files), len(res.Files))
	}
	for _, deep := range []bool{false, true} {
		vr, err := Verify(ctx, st, VerifyOptions{Deep: deep})
		if err != nil || !vr.OK {
			t.Fatalf("Verify(deep=%v) = %+v, %v", deep, vr, err)
		}
	}
	return res
}

func TestPublishPullLocal(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, filepath.Join(t.TempDir(), "v1"))
	opts := quiet()
	opts.Source = "test://ckpt"
	res := roundTrip(t, st, src, opts)
	m := res.Manifest
	if m.Format != ManifestFormat || m.ToolVersion != "test" || m.Source != "test://ckpt" || m.Created.IsZero() || len(m.Files) != 6 {
		t.Fatalf("manifest = %+v", m)
	}
	var multipart bool
	for _, f := range res.Files {
		multipart = multipart || f.PartsSent > 1
		if f.Action != "uploaded" {
			t.Errorf("%s: action %s", f.Path, f.Action)
		}
	}
	if !multipart {
		t.Error("no file went up in parts")
	}
	// The manifest on the store is the one returned, and parses.
	got, _, err := ReadManifest(context.Background(), st)
	if err != nil || got.ContentSHA256 != m.ContentSHA256 {
		t.Fatalf("ReadManifest = %+v, %v", got, err)
	}
}

func TestSecondPublishRefused(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(st.Root(), ManifestKey))
	if _, err := Publish(context.Background(), st, src, quiet()); !errors.Is(err, ErrAlreadyPublished) {
		t.Fatalf("second Publish = %v, want ErrAlreadyPublished", err)
	}
	// Even when the early check is fooled, the conditional write of the manifest refuses.
	h := &hookStore{Store: st, hideStat: map[string]bool{ManifestKey: true}}
	if _, err := Publish(context.Background(), h, src, quiet()); !errors.Is(err, ErrAlreadyPublished) {
		t.Fatalf("Publish past the early check = %v, want ErrAlreadyPublished", err)
	}
	after, _ := os.ReadFile(filepath.Join(st.Root(), ManifestKey))
	if string(before) != string(after) {
		t.Fatal("the manifest changed")
	}
}

// An interrupted publish leaves no manifest; the rerun skips what is stored.
func TestRerunSkipsStoredFiles(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := &hookStore{Store: localStore(t, t.TempDir()), failPut: map[string]int{ManifestKey: 1}}
	if _, err := Publish(context.Background(), st, src, quiet()); !errors.Is(err, errInjected) {
		t.Fatalf("Publish = %v, want the injected failure", err)
	}
	if _, _, err := ReadManifest(context.Background(), st); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("after a failed publish ReadManifest = %v, want ErrNotPublished", err)
	}
	st.partsSent = 0
	res, err := Publish(context.Background(), st, src, quiet())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Files {
		if f.Action != "skipped" {
			t.Errorf("%s: %s, want skipped", f.Path, f.Action)
		}
	}
	if st.partsSent != 0 || res.BytesSent > 4096 {
		t.Fatalf("rerun sent %d parts, %d bytes", st.partsSent, res.BytesSent)
	}
}

func TestCompressRoundTripLocal(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	opts := quiet()
	opts.Compress = true
	res := roundTrip(t, localStore(t, t.TempDir()), src, opts)
	for _, f := range res.Files {
		compressed := strings.HasSuffix(f.Path, ".safetensors")
		if compressed != (f.Compression == CompressionZipNN) {
			t.Errorf("%s: compression %s", f.Path, f.Compression)
		}
		if compressed && f.Ratio < 1.1 {
			t.Errorf("%s: ratio %.3f", f.Path, f.Ratio)
		}
		t.Logf("%s: %d -> %d (%.3fx)", f.Path, f.Size, f.StoredSize, f.Ratio)
	}
}

func TestPullResumes(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 2)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	opts := PullOptions{PartSize: 1 << 20, Parallel: 1, Log: discardLog, OnRange: func(string, int) {
		if n++; n == 5 {
			cancel()
		}
	}}
	if _, err := Pull(ctx, st, out, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Pull = %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, pullState)); err != nil {
		t.Fatalf("no pull state left to resume from: %v", err)
	}
	opts.OnRange = nil
	res, err := Pull(context.Background(), st, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	reused, fetched, total := 0, 0, 0
	for _, f := range res.Files {
		reused += f.RangesReused
		fetched += f.RangesFetched
		total += int((f.StoredSize + opts.PartSize - 1) / opts.PartSize)
	}
	// Five ranges were written before the interruption: kept as ranges or as finished files.
	if reused == 0 || fetched > total-5 {
		t.Fatalf("resumed pull fetched %d of %d ranges and reused %d", fetched, total, reused)
	}
	if _, err := os.Stat(filepath.Join(out, pullState)); !os.IsNotExist(err) {
		t.Fatalf("pull state left behind: %v", err)
	}
	sameTree(t, src, out)
	// A third pull finds everything present.
	res, err = Pull(context.Background(), st, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Files {
		if f.Action != "present" {
			t.Errorf("%s: %s, want present", f.Path, f.Action)
		}
	}
}

func TestCorruptionDetectedLocal(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	for _, compress := range []bool{false, true} {
		st := localStore(t, t.TempDir())
		opts := quiet()
		opts.Compress = compress
		if _, err := Publish(context.Background(), st, src, opts); err != nil {
			t.Fatal(err)
		}
		key := keyIn(t, src, "model-00001-of-00002.safetensors", compress)
		flipByte(t, filepath.Join(st.Root(), key), 1<<20)
		for _, deep := range []bool{false, true} {
			res, err := Verify(context.Background(), st, VerifyOptions{Deep: deep})
			if !errors.Is(err, ErrVerify) || res.Problems != 1 {
				t.Fatalf("compress=%v deep=%v: Verify = %+v, %v; want one problem", compress, deep, res, err)
			}
		}
		out := t.TempDir()
		if _, err := Pull(context.Background(), st, out, PullOptions{Log: discardLog}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("compress=%v: Pull of a corrupt object = %v, want ErrCorrupt", compress, err)
		}
		if _, err := os.Stat(filepath.Join(out, "model-00001-of-00002.safetensors")); !os.IsNotExist(err) {
			t.Fatalf("a corrupt file got its final name: %v", err)
		}
	}
}

func flipByte(t testing.TB, name string, at int64) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func TestPullConflict(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "config.json"), []byte("mine"), 0o644)
	if _, err := Pull(context.Background(), st, out, PullOptions{Log: discardLog}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Pull over a different file = %v, want ErrConflict", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "config.json")); string(b) != "mine" {
		t.Fatal("pull overwrote a file it did not own")
	}
}

// writeManifest stores a hand-made manifest (with a consistent content hash, objects in
// testFolder); files without a key get the one publish would give them.
func writeManifest(t testing.TB, root string, files []File) {
	t.Helper()
	m := Manifest{Format: ManifestFormat, Tool: "pdq", Files: files, ContentSHA256: contentSHA256(files), Folder: testFolder}
	for i, f := range files {
		if f.Key == "" {
			files[i].Key = ObjectKey(m.Format, m.Folder, f.Path, f.Compression == CompressionZipNN)
		}
	}
	b, _ := json.Marshal(m)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ManifestKey), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPullRefusesEscapingPaths(t *testing.T) {
	sha := strings.Repeat("a", 64)
	for _, p := range []string{"../evil", "a/../../evil", "/etc/evil", "a//b", "./a", `a\..\evil`, ".pdq-pull/x", ManifestKey, ""} {
		root := filepath.Join(t.TempDir(), "v1")
		writeManifest(t, root, []File{{Path: p, Size: 1, SHA256: sha, Compression: CompressionNone, Key: p, StoredSize: 1}})
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		_, err := Pull(context.Background(), localStore(t, root), out, PullOptions{Log: discardLog})
		if !errors.Is(err, ErrManifest) {
			t.Errorf("path %q: Pull = %v, want ErrManifest", p, err)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("path %q: Pull wrote %v", p, ents)
		}
	}
}

func TestParseManifestRejects(t *testing.T) {
	sha := strings.Repeat("b", 64)
	good := File{Path: "a", Size: 3, SHA256: sha, Compression: CompressionNone, Key: "a", StoredSize: 3}
	mk := func(edit func(*File)) []File { f := good; edit(&f); return []File{f} }
	for name, files := range map[string][]File{
		"key differs":       mk(func(f *File) { f.Key = "b" }),
		"stored size":       mk(func(f *File) { f.StoredSize = 4 }),
		"negative size":     mk(func(f *File) { f.Size, f.StoredSize = -1, -1 }),
		"short sha":         mk(func(f *File) { f.SHA256 = "abc" }),
		"upper-case sha":    mk(func(f *File) { f.SHA256 = strings.Repeat("B", 64) }),
		"unknown codec":     mk(func(f *File) { f.Compression = "zstd" }),
		"zipnn wrong key":   mk(func(f *File) { f.Compression, f.StoredSHA256 = CompressionZipNN, sha }),
		"zipnn no stored":   mk(func(f *File) { f.Compression, f.Key = CompressionZipNN, "a.zipnn" }),
		"duplicate path":    {good, good},
		"key is a path too": {{Path: "a", Size: 3, SHA256: sha, Compression: CompressionZipNN, Key: "a.zipnn", StoredSize: 2, StoredSHA256: sha}, {Path: "a.zipnn", Size: 1, SHA256: sha, Compression: CompressionNone, Key: "a.zipnn", StoredSize: 1}},
	} {
		m := Manifest{Format: ManifestFormatV1, Files: files, ContentSHA256: contentSHA256(files)}
		b, _ := json.Marshal(m)
		if _, err := ParseManifest(b); !errors.Is(err, ErrManifest) {
			t.Errorf("%s: ParseManifest = %v, want ErrManifest", name, err)
		}
	}
	m := Manifest{Format: ManifestFormatV1, Files: []File{good}, ContentSHA256: strings.Repeat("0", 64)}
	b, _ := json.Marshal(m)
	if _, err := ParseManifest(b); !errors.Is(err, ErrManifest) {
		t.Errorf("wrong content hash: ParseManifest = %v, want ErrManifest", err)
	}
	m.ContentSHA256 = contentSHA256(m.Files)
	b, _ = json.Marshal(m)
	if _, err := ParseManifest(b); err != nil {
		t.Errorf("good manifest: %v", err)
	}

	// Format 3: the objects' folder is named by the manifest, and every key is in it.
	g3 := good
	g3.Key = ObjectKey(ManifestFormat, testFolder, g3.Path, false)
	v3 := func(edit func(*Manifest)) Manifest {
		m := Manifest{Format: ManifestFormat, Files: []File{g3}, ContentSHA256: contentSHA256([]File{g3}), Folder: testFolder}
		edit(&m)
		return m
	}
	for name, m := range map[string]Manifest{
		"no folder":         v3(func(m *Manifest) { m.Folder = "" }),
		"short folder":      v3(func(m *Manifest) { m.Folder = "abc" }),
		"upper-case folder": v3(func(m *Manifest) { m.Folder = strings.ToUpper(testFolder) }),
		"folder not hex":    v3(func(m *Manifest) { m.Folder = strings.Repeat("g", folderLen) }),
		"key in another":    v3(func(m *Manifest) { m.Folder = strings.Repeat("e", folderLen) }),
		"key of format 2":   v3(func(m *Manifest) { m.Files[0].Key = ObjectKey(ManifestFormatV2, m.ContentSHA256, g3.Path, false) }),
		"format 2 w/ folder": v3(func(m *Manifest) {
			m.Format = ManifestFormatV2
			m.Files[0].Key = ObjectKey(ManifestFormatV2, m.ContentSHA256, g3.Path, false)
		}),
	} {
		b, _ := json.Marshal(m)
		if _, err := ParseManifest(b); !errors.Is(err, ErrManifest) {
			t.Errorf("%s: ParseManifest = %v, want ErrManifest", name, err)
		}
	}
	b, _ = json.Marshal(v3(func(*Manifest) {}))
	if _, err := ParseManifest(b); err != nil {
		t.Errorf("good format-3 manifest: %v", err)
	}
}

func TestHashFileParts(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{0, 1, store.MinPartSize, store.MinPartSize + 1, 2*store.MinPartSize + 7} {
		p := filepath.Join(dir, "f")
		data := bf16Bytes(int(size+1)/2, uint64(size))[:size]
		os.WriteFile(p, data, 0o644)
		s, err := hashFile(context.Background(), p, store.MinPartSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := max(1, int((size+store.MinPartSize-1)/store.MinPartSize))
		if len(s.crcs) != want || s.size != size {
			t.Fatalf("size %d: %d parts, want %d", size, len(s.crcs), want)
		}
		for i := range s.crcs {
			off := int64(i) * s.partSize
			if got := crc32c(data[off : off+s.partLen(i)]); got != s.crcs[i] {
				t.Fatalf("size %d part %d: crc %08x, want %08x", size, i, s.crcs[i], got)
			}
		}
	}
	if got := partSizeFor(1<<40, 64<<20); got*store.MaxParts < 1<<40 || got%(1<<20) != 0 {
		t.Fatalf("partSizeFor(1 TiB) = %d", got)
	}
}
