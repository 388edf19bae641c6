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
	// BytesRead counts the bytes of the local file read: its size when it was sent (hashed on
	// the way), 0 when the sums record vouched for it and the store had it.
	BytesRead int64 `json:"bytes_read"`
}

// Result summarises a publish.
type Result struct {
	URL        string       `json:"url"`
	Files      []FileResult `json:"files"`
	Size       int64        `json:"size"`
	StoredSize int64        `json:"stored_size"`
	// BytesHashed counts the bytes of the files hashed: those of files a sums record vouched for
	// (Options.SumsRecord) are not.
	BytesHashed int64 `json:"bytes_hashed"`
	// BytesRead counts the bytes read from the local files, for any purpose (hashing, sending,
	// compressing): a first publish without --compress reads each file once.
	BytesRead   int64     `json:"bytes_read"`
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
	id    *fileID // identity when listed (nil: unknown)
}

// listed returns the localFile of a file with the given FileInfo.
func listed(path, local string, fi fs.FileInfo) localFile {
	f := localFile{path: path, local: local, size: fi.Size()}
	if id, ok := identityOf(fi); ok {
		f.id = &id
	}
	return f
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
		files = append(files, listed(rel, p, fi))
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
		files = append(files, listed(ReportName, report, fi))
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
	placeholder := strings.Repeat("0", folderLen)
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

// removeLoserObjects deletes the objects in this publish's folder once another publish committed
// the version: no manifest names them, unless the winner published from the same folder (the
// same files: then they are the winner's objects), and none the winner's manifest names is
// touched. It is best effort; what it leaves is unreachable, never wrong.
func removeLoserObjects(ctx context.Context, st store.Store, folder string, log *slog.Logger) {
	m, _, err := ReadManifest(ctx, st)
	if err != nil || m.Format == ManifestFormat && m.Folder == folder {
		return
	}
	named := map[string]bool{}
	for _, f := range m.Files {
		named[f.Key] = true
	}
	prefix := ObjectKey(ManifestFormat, folder, "", false)
	var keys []string
	err = st.List(ctx, prefix, func(i store.Info) error {
		if !named[i.Key] {
			keys = append(keys, i.Key)
		}
		return nil
	})
	if err != nil {
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
	if err := checkNotConversionTop(dir); err != nil {
		return nil, err
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
	opts.Progress.AddTotal(total)

	// The objects go to a folder named by the files' identities, known without reading them, so
	// each file is read once: hashed while it is sent. The manifest, written last, carries the
	// sums. Files unchanged since an earlier publish recorded their sums are not hashed again.
	folder := objectFolder(files)
	rec := loadSums(opts.SumsRecord, opts.Log)
	up := &uploader{st: st, bufs: newBufPool(opts.Parallel), tempSlots: par.NewSem(2),
		progress: opts.Progress, onPart: opts.OnPart, log: opts.Log}
	outcomes := make([]fileOutcome, len(files))
	err = forEach(ctx, len(files), opts.Parallel, func(ctx context.Context, i int) error {
		var err error
		outcomes[i], err = publishFile(ctx, up, files[i], folder, rec, opts)
		return err
	})
	rec.save(opts.Log)
	if err != nil {
		return nil, err
	}
	entries := make([]File, len(files))
	results := make([]FileResult, len(files))
	var bytesHashed int64
	for i, o := range outcomes {
		entries[i], results[i] = o.entry, o.result
		bytesHashed += o.hashed
	}

	m := &Manifest{
		Format: ManifestFormat, Tool: "pdq", ToolVersion: opts.ToolVersion,
		Created: opts.Now().UTC().Truncate(time.Second), Source: opts.Source,
		ContentSHA256: contentSHA256(entries), Folder: folder, Files: entries,
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
		removeLoserObjects(ctx, st, folder, opts.Log)
		return nil, fmt.Errorf("%w: %s got a %s from another publish while this one ran; the version holds that publish's files", ErrAlreadyPublished, st, ManifestKey)
	}
	if err != nil {
		return nil, fmt.Errorf("publish: write %s: %w", ManifestKey, err)
	}

	res := &Result{URL: st.String(), Files: results, BytesHashed: bytesHashed, BytesSent: up.bytesSent.Load(), Manifest: m}
	for _, r := range results {
		res.BytesRead += r.BytesRead
		res.Size += r.Size
		res.StoredSize += r.StoredSize
		res.PartsSent += r.PartsSent
		res.PartsReused += r.PartsReused
	}
	res.BytesSent += int64(len(b))
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
