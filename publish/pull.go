package publish

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"pdq/publish/store"
	"pdq/publish/zipnn"
)

// pullState is the folder in the target directory where Pull keeps unfinished downloads:
// obj/KEY (the object being fetched), obj/KEY.parts (the ranges already written) and raw/PATH
// (a file being decompressed). Files reach their final names only once verified.
const pullState = ".pdq-pull"

// PullOptions tune Pull.
type PullOptions struct {
	// Parallel bounds the ranged reads in flight (default DefaultParallel).
	Parallel int
	// PartSize is the length of each ranged read (default DefaultPartSize).
	PartSize int64
	// Progress receives downloaded byte counts (optional).
	Progress Progress
	// Log receives progress details (default slog.Default()).
	Log *slog.Logger
	// OnRange is called after each range is written (optional).
	OnRange func(key string, part int)
}

// PullFile says what happened to one file.
type PullFile struct {
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	StoredSize  int64  `json:"stored_size"`
	Compression string `json:"compression"`
	// Action is "downloaded", "resumed" (ranges of an earlier run were kept) or "present"
	// (already in the directory with the right SHA-256).
	Action         string `json:"action"`
	RangesFetched  int    `json:"ranges_fetched"`
	RangesReused   int    `json:"ranges_reused"`
	BytesRetrieved int64  `json:"bytes_downloaded"`
}

// PullResult summarises a pull.
type PullResult struct {
	URL             string     `json:"url"`
	Dir             string     `json:"dir"`
	Files           []PullFile `json:"files"`
	Size            int64      `json:"size"`
	BytesDownloaded int64      `json:"bytes_downloaded"`
	Seconds         float64    `json:"seconds"`
	Manifest        *Manifest  `json:"manifest"`
}

type puller struct {
	st       store.Store
	root     *os.Root
	sem      chan struct{}
	partSize int64
	progress Progress
	log      *slog.Logger
	onRange  func(string, int)
}

// Pull downloads the version in st into dir: every file in ranged reads run in parallel, checked
// against the manifest's SHA-256, written under a temporary name and renamed into place once
// verified; compressed files are restored to their original bytes. Files already in dir with the
// right SHA-256 are kept; a different file in the way is an error (ErrConflict). Interrupted,
// it resumes from the ranges already written. Manifest paths that would leave dir are refused
// when the manifest is read, and every file operation is confined to dir (os.Root).
func Pull(ctx context.Context, st store.Store, dir string, opts PullOptions) (*PullResult, error) {
	start := time.Now()
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.PartSize <= 0 {
		opts.PartSize = DefaultPartSize
	}
	if opts.Progress == nil {
		opts.Progress = noProgress{}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	m, raw, err := ReadManifest(ctx, st)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	defer root.Close()
	if err := prepareState(root, raw); err != nil {
		return nil, err
	}
	p := &puller{st: st, root: root, sem: make(chan struct{}, opts.Parallel), partSize: opts.PartSize,
		progress: opts.Progress, log: opts.Log, onRange: opts.OnRange}
	var total int64
	for _, f := range m.Files {
		total += f.StoredSize
	}
	p.progress.AddTotal(total)

	res := &PullResult{URL: st.String(), Dir: dir, Files: make([]PullFile, len(m.Files)), Manifest: m}
	err = forEach(ctx, len(m.Files), opts.Parallel, func(ctx context.Context, i int) error {
		r, err := p.pullFile(ctx, m.Files[i])
		res.Files[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := root.RemoveAll(pullState); err != nil {
		return nil, fmt.Errorf("publish: remove %s: %w", pullState, err)
	}
	if err := syncRootDir(root, "."); err != nil {
		return nil, err
	}
	for _, f := range res.Files {
		res.Size += f.Size
		res.BytesDownloaded += f.BytesRetrieved
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// prepareState makes the state folder, emptying it if it belongs to another manifest.
func prepareState(root *os.Root, manifest []byte) error {
	sum := sha256.Sum256(manifest)
	id := hex.EncodeToString(sum[:])
	idFile := pullState + "/manifest.sha256"
	if b, err := root.ReadFile(idFile); err == nil && strings.TrimSpace(string(b)) != id {
		if err := root.RemoveAll(pullState); err != nil {
			return fmt.Errorf("publish: clear %s: %w", pullState, err)
		}
	}
	if err := root.MkdirAll(pullState, 0o755); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := root.WriteFile(idFile, []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

func (p *puller) pullFile(ctx context.Context, f File) (PullFile, error) {
	r := PullFile{Path: f.Path, Size: f.Size, StoredSize: f.StoredSize, Compression: f.Compression}
	if fi, err := p.root.Stat(f.Path); err == nil {
		if fi.Mode().IsRegular() && fi.Size() == f.Size {
			sha, err := p.hash(ctx, f.Path)
			if err != nil {
				return r, err
			}
			if sha == f.SHA256 {
				p.progress.Add(f.StoredSize)
				r.Action = "present"
				return r, nil
			}
		}
		return r, fmt.Errorf("%w: %s already exists and is not the published file; move it away or pull into another directory", ErrConflict, path.Join(p.root.Name(), f.Path))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("publish: %w", err)
	}

	obj := pullState + "/obj/" + f.Key
	want := f.storedSHA256()
	for attempt := 0; ; attempt++ {
		fetched, reused, n, err := p.download(ctx, f, obj)
		if err != nil {
			return r, err
		}
		r.RangesFetched += fetched
		r.RangesReused += reused
		r.BytesRetrieved += n
		sha, err := p.hash(ctx, obj)
		if err != nil {
			return r, err
		}
		if sha == want {
			break
		}
		p.root.Remove(obj)
		p.root.Remove(obj + ".parts")
		if reused == 0 || attempt > 0 {
			return r, fmt.Errorf("%w: %s/%s has sha256 %s, the manifest says %s", ErrCorrupt, p.st, f.Key, sha, want)
		}
		p.log.Warn("resumed download does not verify; fetching again", "key", f.Key)
	}
	r.Action = "downloaded"
	if r.RangesReused > 0 {
		r.Action = "resumed"
	}
	if err := p.root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
		return r, fmt.Errorf("publish: %w", err)
	}
	final := obj
	if f.Compression == CompressionZipNN {
		final = pullState + "/raw/" + f.Path
		if err := p.decompress(ctx, f, obj, final); err != nil {
			return r, err
		}
	}
	if err := p.root.Rename(final, f.Path); err != nil {
		return r, fmt.Errorf("publish: %w", err)
	}
	if err := syncRootDir(p.root, path.Dir(f.Path)); err != nil {
		return r, err
	}
	p.root.Remove(obj)
	p.root.Remove(obj + ".parts")
	return r, nil
}

// hash returns the SHA-256 of a file under the root.
func (p *puller) hash(ctx context.Context, name string) (string, error) {
	f, err := p.root.Open(name)
	if err != nil {
		return "", fmt.Errorf("publish: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	if _, err := io.CopyBuffer(h, ctxReader{ctx, f}, *bp); err != nil {
		return "", fmt.Errorf("publish: hash %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// decompress restores the original bytes of the container obj into final, checking size and SHA-256.
func (p *puller) decompress(ctx context.Context, f File, obj, final string) error {
	if err := p.root.MkdirAll(path.Dir(final), 0o755); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	in, err := p.root.Open(obj)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer in.Close()
	out, err := p.root.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer out.Close()
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(out, h), 1<<20)
	n, err := zipnn.Decompress(ctx, bw, bufio.NewReaderSize(in, 1<<20), zipnn.Options{})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, f.Key, err)
	}
	if sha := hex.EncodeToString(h.Sum(nil)); n != f.Size || sha != f.SHA256 {
		return fmt.Errorf("%w: %s decompresses to %d bytes with sha256 %s; the manifest says %d and %s", ErrCorrupt, f.Key, n, sha, f.Size, f.SHA256)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return out.Close()
}

func syncRootDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("publish: sync %s: %w", dir, err)
	}
	return nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

// Read implements io.Reader.
func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
