package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"pdq/internal/par"
	"pdq/publish/store"
)

// Object metadata written with every file (S3: x-amz-meta-*).
const (
	metaSHA256       = "sha256"        // SHA-256 of the original file
	metaSize         = "size"          // size of the original file
	metaCompression  = "compression"   // CompressionZipNN when compressed; absent otherwise
	metaStoredSHA256 = "stored-sha256" // SHA-256 of the stored bytes, when compressed
)

// Defaults.
const (
	DefaultPartSize = 64 << 20
	DefaultParallel = 8
)

// Options tune Publish.
type Options struct {
	// Source names what the checkpoint was made from; recorded in the manifest.
	Source string
	// ToolVersion is recorded in the manifest.
	ToolVersion string
	// Parallel bounds the requests in flight (default DefaultParallel).
	Parallel int
	// PartSize is the multipart part size (default DefaultPartSize, at least store.MinPartSize);
	// files up to this size go up in one request.
	PartSize int64
	// Compress stores safetensors files as zipnn containers when that makes them smaller.
	Compress bool
	// Report, if set, is a file published as report.json alongside the checkpoint.
	Report string
	// TempDir holds compressed files before upload (default os.TempDir()); at most two exist at
	// a time, so it needs room for the two largest compressed files.
	TempDir string
	// Progress receives byte counts (optional).
	Progress Progress
	// Now gives the creation time (default time.Now).
	Now func() time.Time
	// OnPart is called after each part of a multipart upload is stored (optional).
	OnPart func(key string, part int32)
	// Log receives progress details (default slog.Default()).
	Log *slog.Logger
	// SumsRecord, if set, is a file that keeps each file's SHA-256 and part CRC32Cs with its
	// identity (size, mtime, ctime, inode, device), so that a later publish of the unchanged
	// file does not read it to hash it (DefaultSumsRecord gives pdq publish's place for it).
	SumsRecord string
}

// FileResult says what happened to one file.
type FileResult struct {
	Path        string  `json:"path"`
	Size        int64   `json:"size"`
	StoredSize  int64   `json:"stored_size"`
	Compression string  `json:"compression"`
	Ratio       float64 `json:"ratio"`
	// Action is "uploaded", "resumed" (a multipart upload was continued) or "skipped" (already
	// stored with the same size and SHA-256).
	Action      string `json:"action"`
	PartsSent   int    `json:"parts_sent"`
	PartsReused int    `json:"parts_reused"`
}

// Result summarises a publish.
type Result struct {
	URL        string       `json:"url"`
	Files      []FileResult `json:"files"`
	Size       int64        `json:"size"`
	StoredSize int64        `json:"stored_size"`
	// BytesHashed counts the bytes read to hash files: those of files a sums record vouched for
	// (Options.SumsRecord) are not.
	BytesHashed int64     `json:"bytes_hashed"`
	BytesSent   int64     `json:"bytes_sent"`
	PartsSent   int       `json:"parts_sent"`
	PartsReused int       `json:"parts_reused"`
	Seconds     float64   `json:"seconds"`
	Manifest    *Manifest `json:"manifest"`
}

// localFile is a file to publish.
type localFile struct {
	path  string // manifest path
	local string // file system name
	size  int64
}

// ReportName is the path a report is published under.
const ReportName = "report.json"

// listFiles returns the regular files under dir (symbolic links to files are followed), by path.
func listFiles(dir, report string) ([]localFile, error) {
	var files []localFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == pullState || rel == store.ReservedPrefix {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("publish: %s is not a regular file (%s); only regular files are published", quote(p), fi.Mode().Type())
		}
		if err := ValidPath(rel); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidVersion, quote(p), err)
		}
		files = append(files, localFile{path: rel, local: p, size: fi.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("publish: %s: %w", dir, err)
	}
	if report != "" {
		fi, err := os.Stat(report)
		if err != nil {
			return nil, fmt.Errorf("publish: report: %w", err)
		}
		for _, f := range files {
			if f.path == ReportName {
				return nil, fmt.Errorf("publish: %s already has a %s; not adding %s", dir, ReportName, report)
			}
		}
		files = append(files, localFile{path: ReportName, local: report, size: fi.Size()})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("publish: %s holds no files", dir)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, nil
}

// checkVersion refuses, before anything is read or sent, a set of files that pull would refuse
// as a version: names over the limits (once the object key adds its folder and .zipnn), a file
// where another needs a directory ("a" and "a/b"), and a file name that --compress would give
// to another file's object ("m.safetensors" compressed next to "m.safetensors.zipnn").
func checkVersion(files []localFile, compress bool) error {
	paths := map[string]bool{}
	for _, f := range files {
		paths[f.path] = true
	}
	if a, ab := prefixConflict(paths); a != "" {
		return fmt.Errorf("%w: %s is a file, but %s needs it to be a directory", ErrInvalidVersion, quote(a), quote(ab))
	}
	keys := map[string]bool{}
	placeholder := strings.Repeat("0", 64)
	for _, f := range files {
		key := ObjectKey(ManifestFormat, placeholder, f.path, compress && compressible(f.path))
		if compress && compressible(f.path) && paths[f.path+zipnnSuffix] {
			return fmt.Errorf("%w: with --compress %s is stored as %s, the name of another file", ErrInvalidVersion, quote(f.path), quote(f.path+zipnnSuffix))
		}
		if err := validLength("object key", key); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidVersion, quote(f.path), err)
		}
		keys[key] = true
		// Compression may not pay: the file is then stored under its plain key.
		keys[ObjectKey(ManifestFormat, placeholder, f.path, false)] = true
	}
	if a, ab := prefixConflict(keys); a != "" {
		return fmt.Errorf("%w: object %s is a file, but object %s needs it to be a folder", ErrInvalidVersion, quote(a), quote(ab))
	}
	return nil
}

// Quote returns a file name as it may be shown: as is when it is plain (printable, no space, quote
// or backslash), otherwise as a quoted Go string literal, so that control characters, terminal
// escape sequences and invisible or bidirectional marks never reach a terminal raw.
func Quote(s string) string {
	q := strconv.QuoteToGraphic(s)
	if s != "" && q == `"`+s+`"` && !strings.Contains(s, " ") {
		return s
	}
	return q
}

func quote(s string) string { return Quote(s) }

// removeLoserObjects deletes the objects this publish wrote once another publish committed the
// version: unless the winner published the same content (then they are the winner's objects),
// no manifest names them. It is best effort; what it leaves is unreachable, never wrong.
func removeLoserObjects(ctx context.Context, st store.Store, content string, log *slog.Logger) {
	m, _, err := ReadManifest(ctx, st)
	if err != nil || m.ContentSHA256 == content {
		return
	}
	prefix := ObjectKey(ManifestFormat, content, "", false)
	var keys []string
	if err := st.List(ctx, prefix, func(i store.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		log.Warn("could not list the objects of the losing publish", "prefix", prefix, "err", err)
		return
	}
	for _, k := range keys {
		if err := st.Delete(ctx, k); err != nil {
			log.Warn("could not delete an object of the losing publish", "key", k, "err", err)
		}
	}
}

// limitStore bounds the requests in flight on st: parallel transfers (parts up, ranges down)
// and as many other requests (see store.Limit).
func limitStore(st store.Store, parallel int) store.Store {
	return store.Limit(st, store.Limits{Transfer: parallel, Meta: parallel})
}

// compressible says whether --compress applies to a file.
func compressible(path string) bool { return strings.HasSuffix(path, ".safetensors") }

// Publish uploads every file of the checkpoint directory dir (and opts.Report) to st, then
// writes the manifest last, on the condition that none exists. It fails with ErrAlreadyPublished
// if the version has a manifest. Run again after an interruption, it skips the files already
// stored and resumes the multipart uploads it left.
func Publish(ctx context.Context, st store.Store, dir string, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.PartSize == 0 {
		opts.PartSize = DefaultPartSize
	}
	if opts.PartSize < store.MinPartSize {
		return nil, fmt.Errorf("publish: part size %d is under the %d minimum", opts.PartSize, store.MinPartSize)
	}
	if opts.Progress == nil {
		opts.Progress = noProgress{}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	st = limitStore(st, opts.Parallel)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("publish: %s is not a directory", dir)
	}
	files, err := listFiles(dir, opts.Report)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(files, opts.Compress); err != nil {
		return nil, err
	}
	if _, err := st.Stat(ctx, ManifestKey); err == nil {
		return nil, fmt.Errorf("%w: %s has a %s; publish to a new version", ErrAlreadyPublished, st, ManifestKey)
	} else if !errors.Is(err, store.ErrNotExist) {
		return nil, err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	opts.Progress.AddTotal(2 * total) // one pass to hash, one to send

	// Every file is hashed first: the checkpoint's content hash names the folder its objects go
	// to, so publishers of different content never write to the same key.
	// Files unchanged since an earlier publish recorded their sums are not read for it.
	rec := loadSums(opts.SumsRecord, opts.Log)
	hashed := make([]sums, len(files))
	entries := make([]File, len(files))
	var bytesHashed atomic.Int64
	err = forEach(ctx, len(files), opts.Parallel, func(ctx context.Context, i int) error {
		s, read, err := fileSums(ctx, files[i], opts.PartSize, rec)
		hashed[i] = s
		entries[i] = File{Path: files[i].path, Size: s.size, SHA256: s.sha256}
		if read {
			bytesHashed.Add(s.size)
		}
		opts.Progress.Add(s.size)
		return err
	})
	rec.save(opts.Log)
	if err != nil {
		return nil, err
	}
	content := contentSHA256(entries)

	up := &uploader{st: st, parallel: opts.Parallel, tempSlots: par.NewSem(2),
		progress: opts.Progress, onPart: opts.OnPart, log: opts.Log}
	results := make([]FileResult, len(files))
	err = forEach(ctx, len(files), opts.Parallel, func(ctx context.Context, i int) error {
		e, r, err := publishFile(ctx, up, files[i], hashed[i], content, opts)
		entries[i], results[i] = e, r
		return err
	})
	if err != nil {
		return nil, err
	}

	m := &Manifest{
		Format: ManifestFormat, Tool: "pdq", ToolVersion: opts.ToolVersion,
		Created: opts.Now().UTC().Truncate(time.Second), Source: opts.Source,
		ContentSHA256: contentSHA256(entries), Files: entries,
	}
	for _, e := range entries {
		if e.Path == ReportName {
			m.Report = ReportName
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("publish: manifest: %w", err)
	}
	b = append(b, '\n')
	// What is committed passes the rules every reader applies.
	if _, err := ParseManifest(b); err != nil {
		return nil, fmt.Errorf("publish: the manifest this publish made is refused by pull: %w", err)
	}
	err = st.Put(ctx, ManifestKey, bytes.NewReader(b), int64(len(b)), store.PutOptions{IfNoneMatch: true})
	if errors.Is(err, store.ErrExists) {
		removeLoserObjects(ctx, st, content, opts.Log)
		return nil, fmt.Errorf("%w: %s got a %s from another publish while this one ran; the version holds that publish's files", ErrAlreadyPublished, st, ManifestKey)
	}
	if err != nil {
		return nil, fmt.Errorf("publish: write %s: %w", ManifestKey, err)
	}

	res := &Result{URL: st.String(), Files: results, BytesHashed: bytesHashed.Load(), BytesSent: up.bytesSent.Load(), Manifest: m}
	for _, r := range results {
		res.Size += r.Size
		res.StoredSize += r.StoredSize
		res.PartsSent += r.PartsSent
		res.PartsReused += r.PartsReused
	}
	res.BytesSent += int64(len(b))
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
