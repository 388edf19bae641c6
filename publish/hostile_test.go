package publish

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pdq/publish/store"
)

// testFolder is the object folder of hand-made manifests (writeManifest).
var testFolder = strings.Repeat("f", folderLen)

// withKeys gives each file the key publish would give it in testFolder.
func withKeys(files []File) []File {
	for i, f := range files {
		files[i].Key = ObjectKey(ManifestFormat, testFolder, f.Path, f.Compression == CompressionZipNN)
	}
	return files
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// bomb returns a well-formed zipnn container of n run-length chunks of 256 KiB zeros: 17 bytes
// of object per 256 KiB of output.
func bomb(n int) []byte {
	const chunk = 1 << 18
	tab := crc32.MakeTable(crc32.Castagnoli)
	zeroCRC := crc32.Checksum(make([]byte, chunk), tab)
	b := make([]byte, 32+16*n+4)
	copy(b, "PDQZ")
	binary.LittleEndian.PutUint16(b[4:], 1)
	binary.LittleEndian.PutUint64(b[8:], uint64(n)*chunk)
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	binary.LittleEndian.PutUint64(b[24:], uint64(len(b)))
	for i := range n {
		e := b[32+16*i:]
		binary.LittleEndian.PutUint32(e[0:], chunk)
		binary.LittleEndian.PutUint32(e[4:], 1)
		binary.LittleEndian.PutUint32(e[8:], zeroCRC)
		e[12] = 2 // rle
	}
	end := 32 + 16*n
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], tab))
	return append(b, make([]byte, n)...) // one payload byte (0) per chunk
}

// dirBytes returns the bytes of all regular files under dir.
func dirBytes(t testing.TB, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// A 70 KB object that expands to 1 GiB, under a manifest that says 1000 bytes: pull and deep
// verify stop before writing past the manifest's size, and nothing gets a final name.
func TestDecompressionBomb(t *testing.T) {
	root := filepath.Join(t.TempDir(), "v1")
	obj := bomb(4096)
	f := File{Path: "m.safetensors", Size: 1000, SHA256: strings.Repeat("0", 64), Compression: CompressionZipNN,
		StoredSize: int64(len(obj)), StoredSHA256: sha256Hex(obj)}
	key := withKeys([]File{f})[0].Key
	f.Key = key
	writeManifest(t, root, []File{f})
	os.MkdirAll(filepath.Dir(filepath.Join(root, key)), 0o755)
	if err := os.WriteFile(filepath.Join(root, key), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	_, err := Pull(context.Background(), localStore(t, root), out, PullOptions{Log: discardLog})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Pull of a bomb = %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(out, f.Path)); !os.IsNotExist(err) {
		t.Fatalf("the bomb got its final name: %v", err)
	}
	// What pull wrote: the object (kept to resume) and no more than the manifest's size besides.
	if got := dirBytes(t, out); got > int64(len(obj))+f.Size+4096 {
		t.Fatalf("pull of a %d-byte object wrote %d bytes", len(obj), got)
	}
	res, err := Verify(context.Background(), localStore(t, root), VerifyOptions{Deep: true})
	if !errors.Is(err, ErrVerify) || !strings.Contains(res.Files[0].Problem, "expected 1000") {
		t.Fatalf("deep verify of a bomb = %+v, %v", res, err)
	}
}

func TestParseManifestStrict(t *testing.T) {
	sha := strings.Repeat("b", 64)
	files := []File{{Path: "a", Size: 3, SHA256: sha, Compression: CompressionNone, Key: "a", StoredSize: 3}}
	good, _ := json.Marshal(Manifest{Format: ManifestFormatV1, Files: files, ContentSHA256: contentSHA256(files)})
	if _, err := ParseManifest(good); err != nil {
		t.Fatalf("good manifest: %v", err)
	}
	s := string(good)
	for name, b := range map[string]string{
		"trailing garbage":      s + "garbage",
		"a second value":        s + ` {}`,
		"FILES for files":       strings.Replace(s, `"files"`, `"FILES"`, 1),
		"Path for path":         strings.Replace(s, `"path"`, `"Path"`, 1),
		"format given twice":    strings.Replace(s, `{"format"`, `{"format":"x","format"`, 1),
		"a file field twice":    strings.Replace(s, `"size":3`, `"size":3,"size":3`, 1),
		"unknown field":         strings.Replace(s, `{"format"`, `{"extra":1,"format"`, 1),
		"unknown field in file": strings.Replace(s, `"size":3`, `"size":3,"mode":420`, 1),
	} {
		if b == s {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, err := ParseManifest([]byte(b)); !errors.Is(err, ErrManifest) {
			t.Errorf("%s: ParseManifest = %v, want ErrManifest", name, err)
		}
	}
}

// hookRanges counts the object reads of a store.
type hookRanges struct {
	store.Store
	gets int
}

func (h *hookRanges) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key != ManifestKey {
		h.gets++
	}
	return h.Store.GetRange(ctx, key, off, n)
}

// A file that another file needs as its directory ("a" and "a/b") is refused when the manifest
// is read, before any download; so is a name no file system takes.
func TestPullRefusesUnpullableVersions(t *testing.T) {
	sha := strings.Repeat("a", 64)
	for name, files := range map[string][]File{
		"a and a/b":          {{Path: "a", Size: 1, SHA256: sha}, {Path: "a/b", Size: 1, SHA256: sha}},
		"a/b and a/b/c/d":    {{Path: "a/b/c/d", Size: 1, SHA256: sha}, {Path: "a/b", Size: 1, SHA256: sha}},
		"a 256-byte name":    {{Path: strings.Repeat("n", 256), Size: 1, SHA256: sha}},
		"a 1100-byte path":   {{Path: strings.Repeat("d/", 550) + "f", Size: 1, SHA256: sha}},
		"a 300-byte dirname": {{Path: strings.Repeat("d", 300) + "/f", Size: 1, SHA256: sha}},
	} {
		for i := range files {
			files[i].Compression, files[i].StoredSize = CompressionNone, files[i].Size
		}
		root := filepath.Join(t.TempDir(), "v1")
		writeManifest(t, root, withKeys(files))
		h := &hookRanges{Store: localStore(t, root)}
		parent := t.TempDir()
		_, err := Pull(context.Background(), h, filepath.Join(parent, "out"), PullOptions{Log: discardLog})
		if !errors.Is(err, ErrManifest) {
			t.Errorf("%s: Pull = %v, want ErrManifest", name, err)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 || h.gets != 0 {
			t.Errorf("%s: Pull read %d objects and wrote %v", name, h.gets, ents)
		}
	}
}

// A conflicting file is found before anything is downloaded.
func TestPullConflictBeforeDownload(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(out string){
		"a different file": func(out string) {
			os.WriteFile(filepath.Join(out, "model-00002-of-00002.safetensors"), []byte("mine"), 0o644)
		},
		"a file where a dir goes":       func(out string) { os.WriteFile(filepath.Join(out, "extra"), []byte("mine"), 0o644) },
		"a directory where a file goes": func(out string) { os.MkdirAll(filepath.Join(out, "config.json"), 0o755) },
	} {
		out := t.TempDir()
		plant(out)
		h := &hookRanges{Store: st}
		_, err := Pull(context.Background(), h, out, PullOptions{Parallel: 1, Log: discardLog})
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "nothing was downloaded") {
			t.Errorf("%s: Pull = %v, want ErrConflict", name, err)
		}
		if h.gets != 0 {
			t.Errorf("%s: %d objects read before the conflict was reported", name, h.gets)
		}
	}
}

// Hard links and symbolic links planted in pull's working folder, under every name an earlier
// pull could have left (today's hashed names and the plain names of older versions), are
// replaced, never written through.
func TestPullDoesNotWriteThroughPlantedLinks(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	for _, compress := range []bool{false, true} {
		st := localStore(t, t.TempDir())
		opts := quiet()
		opts.Compress = compress
		if _, err := Publish(context.Background(), st, src, opts); err != nil {
			t.Fatal(err)
		}
		m, raw, err := ReadManifest(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		base := t.TempDir()
		victim := filepath.Join(base, "victim")
		const keep = "precious bytes\n"
		os.WriteFile(victim, []byte(keep), 0o600)
		out := filepath.Join(base, "out")
		// The state of an earlier pull of this very manifest, so that it is not cleared first.
		os.MkdirAll(filepath.Join(out, pullState, "obj"), 0o755)
		os.MkdirAll(filepath.Join(out, pullState, "raw"), 0o755)
		os.WriteFile(filepath.Join(out, pullState, "manifest.sha256"), []byte(sha256Hex(raw)+"\n"), 0o644)
		var names []string
		for _, f := range m.Files {
			names = append(names, stateName("obj", f.Key), stateName("obj", f.Key)+".parts", stateName("raw", f.Path),
				pullState+"/obj/"+f.Key, pullState+"/obj/"+f.Key+".parts", pullState+"/raw/"+f.Path)
		}
		planted := map[string]bool{}
		for i, n := range names {
			if planted[n] {
				continue
			}
			planted[n] = true
			p := filepath.Join(out, filepath.FromSlash(n))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if i%2 == 0 {
				err = os.Link(victim, p)
			} else {
				err = os.Symlink(victim, p)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Pull(context.Background(), st, out, PullOptions{Log: discardLog}); err != nil {
			t.Fatalf("compress=%v: Pull = %v", compress, err)
		}
		if b, _ := os.ReadFile(victim); string(b) != keep {
			t.Fatalf("compress=%v: pull wrote through a planted link: the victim holds %d bytes", compress, len(b))
		}
		sameTree(t, src, out)
	}
}

// A FIFO in a local store (as the manifest, or as an object) is refused, not waited on.
func TestLocalStoreFIFO(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	root := t.TempDir()
	st := localStore(t, root)
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(root, filepath.FromSlash(keyIn(t, src, "config.json", false)))
	os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Verify(context.Background(), st, VerifyOptions{Deep: true})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrVerify) {
			t.Fatalf("deep verify with a FIFO as an object = %v, want ErrVerify", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("deep verify still blocked on a FIFO after a minute")
	}
	os.Remove(filepath.Join(root, ManifestKey))
	syscall.Mkfifo(filepath.Join(root, ManifestKey), 0o644)
	go func() {
		_, _, err := ReadManifest(context.Background(), st)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotPublished) {
			t.Fatalf("a FIFO manifest = %v, want ErrNotPublished", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ReadManifest still blocked on a FIFO after a minute")
	}
}

// Versions published in format 1 (objects next to the manifest, under their paths) and format 2
// (objects under data/CONTENT_SHA256/) still pull and verify.
func TestOlderFormatsStillRead(t *testing.T) {
	data := map[string][]byte{"config.json": []byte("{}\n"), "sub/w.bin": bf16Bytes(1<<20, 9)}
	for _, format := range []string{ManifestFormatV1, ManifestFormatV2} {
		root := t.TempDir()
		var files []File
		for p, b := range data {
			files = append(files, File{Path: p, Size: int64(len(b)), SHA256: sha256Hex(b), Compression: CompressionNone, StoredSize: int64(len(b))})
		}
		m := Manifest{Format: format, Tool: "pdq", Files: files, ContentSHA256: contentSHA256(files)}
		for i, f := range files {
			files[i].Key = ObjectKey(format, m.ContentSHA256, f.Path, false)
			os.MkdirAll(filepath.Dir(filepath.Join(root, files[i].Key)), 0o755)
			os.WriteFile(filepath.Join(root, files[i].Key), data[f.Path], 0o644)
		}
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(root, ManifestKey), b, 0o644)
		out := t.TempDir()
		if _, err := Pull(context.Background(), localStore(t, root), out, PullOptions{Log: discardLog}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		for p, want := range data {
			if got, _ := os.ReadFile(filepath.Join(out, p)); string(got) != string(want) {
				t.Fatalf("%s: %s differs", format, p)
			}
		}
		if _, err := Verify(context.Background(), localStore(t, root), VerifyOptions{Deep: true}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
	}
}
