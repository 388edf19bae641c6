// Package publish uploads finished checkpoint directories to an object store as immutable,
// verifiable versions, and pulls and verifies them again.
//
// A published version is a store root (s3://bucket/prefix or a directory) holding every file of
// the checkpoint under its relative path (or path + ".zipnn" when compressed) and, written last
// with a create-only condition, manifest.json: without the manifest a version does not exist, and
// once it exists it is never overwritten.
package publish

import (
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
)

// ManifestKey is the key of the manifest in a version.
const ManifestKey = "manifest.json"

// ManifestFormat names the manifest layout below.
const ManifestFormat = "pdq-publish/1"

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
//	  "format": "pdq-publish/1",
//	  "tool": "pdq", "tool_version": "0.1.0",
//	  "created": "2026-01-02T03:04:05Z",
//	  "source": "hf://zai-org/GLM-5-FP8@3f1c2a",
//	  "content_sha256": "…",
//	  "report": "report.json",
//	  "files": [
//	    {"path": "config.json", "size": 1234, "sha256": "…", "compression": "none",
//	     "key": "config.json", "stored_size": 1234},
//	    {"path": "model-00001-of-00002.safetensors", "size": 4999000000, "sha256": "…",
//	     "compression": "zipnn-v1", "key": "model-00001-of-00002.safetensors.zipnn",
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
// directory it is joined to, and is not the manifest or pull's state folder.
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
	return nil
}

func validHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// ParseManifest decodes and checks a manifest: format, safe and unique paths and keys, sizes,
// checksums, and the content hash.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrManifest, m.Format, ManifestFormat)
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
			if f.Key != f.Path || f.StoredSize != f.Size || f.StoredSHA256 != "" {
				return nil, bad("uncompressed file must be stored under its path, as is")
			}
		case CompressionZipNN:
			if f.Key != f.Path+zipnnSuffix || !validHex(f.StoredSHA256) {
				return nil, bad("compressed file must be stored under path" + zipnnSuffix + " with stored_sha256")
			}
		default:
			return nil, bad(fmt.Sprintf("unknown compression %q", f.Compression))
		}
		if keys[f.Key] {
			return nil, bad("key used twice")
		}
		keys[f.Key] = true
	}
	for _, f := range m.Files {
		if paths[f.Key] && f.Key != f.Path {
			return nil, fmt.Errorf("%w: key %q is also a path", ErrManifest, f.Key)
		}
	}
	if m.Report != "" && !paths[m.Report] {
		return nil, fmt.Errorf("%w: report %q is not among the files", ErrManifest, m.Report)
	}
	if got := contentSHA256(m.Files); got != m.ContentSHA256 {
		return nil, fmt.Errorf("%w: content_sha256 %s does not match the files (%s)", ErrManifest, m.ContentSHA256, got)
	}
	return &m, nil
}
