// Package publish uploads finished checkpoint directories to an object store as immutable,
// verifiable versions, and pulls and verifies them again.
//
// A published version is a store root (s3://bucket/prefix or a directory) holding every file of
// the checkpoint under a key in its publisher's own folder, data/FOLDER/PATH (or PATH.zipnn when
// compressed), where FOLDER names the files being published (their identities on the
// publisher's host, see objectFolder) without reading them, and, written last with a
// create-only condition, manifest.json: the single commit point. Without the manifest a version
// does not exist; once it exists it is never overwritten, and a publisher of other files that
// lost the race to write it never wrote under the keys the manifest names.
package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"pdq/publish/store"
)

// Sentinel errors.
var (
	// ErrAlreadyPublished: the version already has a manifest; versions are immutable.
	ErrAlreadyPublished = errors.New("publish: version already published")
	// ErrNotPublished: no manifest at the URL (never published, or the publish did not finish).
	ErrNotPublished = errors.New("publish: no published version here")
	// ErrManifest: the manifest is malformed or unsafe (a path escaping the directory, ...).
	ErrManifest = errors.New("publish: bad manifest")
	// ErrCorrupt: stored bytes do not match the manifest.
	ErrCorrupt = errors.New("publish: content does not match the manifest")
	// ErrConflict: pull found a different file where a published one goes.
	ErrConflict = errors.New("publish: a different file is in the way")
	// ErrVerify: verification found problems (listed in the VerifyResult).
	ErrVerify = errors.New("publish: verification failed")
	// ErrInvalidVersion: the files of a directory cannot be published as one version that pull
	// could restore (names too long, a file where another needs a directory, colliding keys).
	ErrInvalidVersion = errors.New("publish: cannot be published as a version")
	// ErrConversionTop: the directory is the top folder of a conversion (its prefill and decode
	// checkpoints, its journal), not one checkpoint.
	ErrConversionTop = errors.New("publish: a conversion's top folder, not a checkpoint")
)

// ManifestKey is the key of the manifest in a version.
const ManifestKey = "manifest.json"

// ManifestFormat names the manifest layout below, which this package writes: objects under
// data/FOLDER/, FOLDER given by the manifest's folder field. ManifestFormatV2 (objects under
// data/CONTENT_SHA256/) and ManifestFormatV1 (objects under their paths) are still read.
const (
	ManifestFormat   = "pdq-publish/3"
	ManifestFormatV2 = "pdq-publish/2"
	ManifestFormatV1 = "pdq-publish/1"
)

// dataPrefix is the folder of a version's objects (formats 2 and 3).
const dataPrefix = "data/"

// folderLen is the length of a format-3 object folder's name: 128 bits in lower-case hex.
const folderLen = 32

// Name limits every path and key keeps, so that a version pulls into any POSIX file system and
// fits an S3 key: at most maxSegment bytes per segment (NAME_MAX) and maxKey bytes in all.
const (
	maxSegment = 255
	maxKey     = 1024
)

// ObjectKey returns the key of a file's object in a version of the given format whose objects
// are in folder (format 3: the manifest's Folder; format 2: its ContentSHA256; format 1: unused).
func ObjectKey(format, folder, path string, compressed bool) string {
	k := path
	if compressed {
		k += zipnnSuffix
	}
	if format == ManifestFormatV1 {
		return k
	}
	return dataPrefix + folder + "/" + k
}

// ObjectFolder returns the folder ObjectKey puts the manifest's objects in.
func (m *Manifest) ObjectFolder() string {
	if m.Format == ManifestFormat {
		return m.Folder
	}
	return m.ContentSHA256
}

// Compression names.
const (
	CompressionNone  = "none"
	CompressionZipNN = "zipnn-v1"
)

// zipnnSuffix ends the key of a compressed file.
const zipnnSuffix = ".zipnn"

// maxManifest bounds the manifest a reader accepts.
const maxManifest = 64 << 20

// Manifest describes one published version. Example:
//
//	{
//	  "format": "pdq-publish/3",
//	  "tool": "pdq", "tool_version": "0.1.0",
//	  "created": "2026-01-02T03:04:05Z",
//	  "source": "hf://zai-org/GLM-5-FP8@3f1c2a",
//	  "content_sha256": "…",
//	  "folder": "0f3c…",
//	  "report": "report.json",
//	  "files": [
//	    {"path": "config.json", "size": 1234, "sha256": "…", "compression": "none",
//	     "key": "data/0f3c…/config.json", "stored_size": 1234},
//	    {"path": "model-00001-of-00002.safetensors", "size": 4999000000, "sha256": "…",
//	     "compression": "zipnn-v1", "key": "data/0f3c…/model-00001-of-00002.safetensors.zipnn",
//	     "stored_size": 3310000000, "stored_sha256": "…"}
//	  ]
//	}
type Manifest struct {
	Format      string    `json:"format"`
	Tool        string    `json:"tool"`
	ToolVersion string    `json:"tool_version"`
	Created     time.Time `json:"created"`
	// Source names what the checkpoint was made from (free text given by the publisher).
	Source string `json:"source,omitempty"`
	// ContentSHA256 identifies the checkpoint itself: the SHA-256 of ContentLines. The same
	// files give the same value wherever and whenever they are published.
	ContentSHA256 string `json:"content_sha256"`
	// Folder (format 3) names the folder of the objects, data/FOLDER/: 32 lower-case hex digits
	// chosen by the publisher before it read the files, so that no other publisher writes there.
	Folder string `json:"folder,omitempty"`
	// Report is the path of the conversion report among Files, if one was published.
	Report string `json:"report,omitempty"`
	Files  []File `json:"files"`
}

// File is one file of a version.
type File struct {
	// Path is the file's slash-separated path relative to the checkpoint directory.
	Path string `json:"path"`
	// Size and SHA256 (lower-case hex) describe the original bytes.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Compression is CompressionNone or CompressionZipNN.
	Compression string `json:"compression"`
	// Key is the object holding the file, relative to the version.
	Key string `json:"key"`
	// StoredSize is the object's size; StoredSHA256 its SHA-256 when compressed.
	StoredSize   int64  `json:"stored_size"`
	StoredSHA256 string `json:"stored_sha256,omitempty"`
}

// storedSHA256 returns the SHA-256 the stored object must have.
func (f File) storedSHA256() string {
	if f.Compression == CompressionNone {
		return f.SHA256
	}
	return f.StoredSHA256
}

// ContentLines is what ContentSHA256 hashes: one "sha256 size path\n" line per file, by path.
func ContentLines(files []File) string {
	fs := append([]File(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s %d %s\n", f.SHA256, f.Size, f.Path)
	}
	return b.String()
}

func contentSHA256(files []File) string {
	s := sha256.Sum256([]byte(ContentLines(files)))
	return hex.EncodeToString(s[:])
}

// ValidPath returns an error unless p is a clean relative slash path that stays inside the
// directory it is joined to, keeps the name limits, and is not the manifest or pull's state
// folder.
func ValidPath(p string) error {
	if err := store.ValidKey(p); err != nil {
		return fmt.Errorf("%w: path %q: %v", ErrManifest, p, err)
	}
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("%w: path %q is not local", ErrManifest, p)
	}
	if p == ManifestKey || p == pullState || strings.HasPrefix(p, pullState+"/") {
		return fmt.Errorf("%w: path %q is reserved", ErrManifest, p)
	}
	return validLength("path", p)
}

// validLength checks the name limits of a path or key.
func validLength(what, name string) error {
	if len(name) > maxKey {
		return fmt.Errorf("%w: %s %q is %d bytes long, over the %d-byte limit", ErrManifest, what, name, len(name), maxKey)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if len(seg) > maxSegment {
			return fmt.Errorf("%w: %s %q has a %d-byte name, over the %d-byte limit of file systems", ErrManifest, what, name, len(seg), maxSegment)
		}
	}
	return nil
}

// prefixConflict returns a name of names that another one needs as a directory ("a" and "a/b"),
// or "" when there is none.
func prefixConflict(names map[string]bool) (file, under string) {
	for n := range names {
		for i := range len(n) {
			if n[i] == '/' && names[n[:i]] {
				return n[:i], n
			}
		}
	}
	return "", ""
}

func validHex(s string) bool { return validLowerHex(s, 64) }

func validFolder(s string) bool { return validLowerHex(s, folderLen) }

func validLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// ParseManifest decodes and checks a manifest: format, safe and unique paths and keys, sizes,
// checksums, and the content hash.
// Decoding is strict: one JSON value and nothing after it, field names exactly as written here
// (no other case), no field twice, no unknown field.
func ParseManifest(b []byte) (*Manifest, error) {
	if err := checkStrictJSON(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if m.Format != ManifestFormat && m.Format != ManifestFormatV2 && m.Format != ManifestFormatV1 {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrManifest, m.Format, ManifestFormat)
	}
	if m.Format != ManifestFormatV1 && !validHex(m.ContentSHA256) {
		return nil, fmt.Errorf("%w: content_sha256 %q is not a lower-case SHA-256", ErrManifest, m.ContentSHA256)
	}
	if m.Format == ManifestFormat && !validFolder(m.Folder) {
		return nil, fmt.Errorf("%w: folder %q is not %d lower-case hex digits", ErrManifest, m.Folder, folderLen)
	}
	if m.Format != ManifestFormat && m.Folder != "" {
		return nil, fmt.Errorf("%w: format %q has no folder field", ErrManifest, m.Format)
	}
	paths, keys := map[string]bool{}, map[string]bool{}
	for _, f := range m.Files {
		if err := ValidPath(f.Path); err != nil {
			return nil, err
		}
		bad := func(why string) error { return fmt.Errorf("%w: file %q: %s", ErrManifest, f.Path, why) }
		if paths[f.Path] {
			return nil, bad("listed twice")
		}
		paths[f.Path] = true
		if f.Size < 0 || f.StoredSize < 0 || !validHex(f.SHA256) {
			return nil, bad("bad size or sha256")
		}
		switch f.Compression {
		case CompressionNone:
			if want := ObjectKey(m.Format, m.ObjectFolder(), f.Path, false); f.Key != want || f.StoredSize != f.Size || f.StoredSHA256 != "" {
				return nil, bad(fmt.Sprintf("uncompressed file must be stored as is under %q", want))
			}
		case CompressionZipNN:
			if want := ObjectKey(m.Format, m.ObjectFolder(), f.Path, true); f.Key != want || !validHex(f.StoredSHA256) {
				return nil, bad(fmt.Sprintf("compressed file must be stored under %q with stored_sha256", want))
			}
		default:
			return nil, bad(fmt.Sprintf("unknown compression %q", f.Compression))
		}
		if err := validLength("key", f.Key); err != nil {
			return nil, err
		}
		if keys[f.Key] {
			return nil, bad("key used twice")
		}
		keys[f.Key] = true
	}
	for _, f := range m.Files {
		if m.Format == ManifestFormatV1 && paths[f.Key] && f.Key != f.Path {
			return nil, fmt.Errorf("%w: key %q is also a path", ErrManifest, f.Key)
		}
	}
	if a, ab := prefixConflict(paths); a != "" {
		return nil, fmt.Errorf("%w: path %q is a file, but %q needs it to be a directory", ErrManifest, a, ab)
	}
	if m.Format == ManifestFormatV1 { // keys and paths share the version's folder
		for p := range paths {
			keys[p] = true
		}
	}
	if a, ab := prefixConflict(keys); a != "" {
		return nil, fmt.Errorf("%w: key %q is an object, but key %q needs it to be a folder", ErrManifest, a, ab)
	}
	if m.Report != "" && !paths[m.Report] {
		return nil, fmt.Errorf("%w: report %q is not among the files", ErrManifest, m.Report)
	}
	if got := contentSHA256(m.Files); got != m.ContentSHA256 {
		return nil, fmt.Errorf("%w: content_sha256 %s does not match the files (%s)", ErrManifest, m.ContentSHA256, got)
	}
	return &m, nil
}
