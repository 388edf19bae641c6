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
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"pdq/publish/store"
	"pdq/publish/zipnn"
)

// pullState is the folder in the target directory where Pull keeps unfinished downloads, under
// names no published path can take (ValidPath refuses the folder, and the names inside are
// hashes): obj/H (the object with key hash H being fetched), obj/H.parts (the ranges of it already
// written) and raw/H (a file, path hash H, being decompressed). Files reach their final names
// only once verified.
const pullState = ".pdq-pull"

// stateName returns the name in pull's state folder of a key or path.
func stateName(dir, name string) string {
	sum := sha256.Sum256([]byte(name))
	return pullState + "/" + dir + "/" + hex.EncodeToString(sum[:])
}

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
	parallel int // ranges of one file handed to the store at once
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
	st = limitStore(st, opts.Parallel)
	m, raw, err := ReadManifest(ctx, st)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Lstat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	defer root.Close()
	p := &puller{st: st, root: root, parallel: opts.Parallel, partSize: opts.PartSize,
		progress: opts.Progress, log: opts.Log, onRange: opts.OnRange}
	// Every file in the way is found, and the free space checked, before anything is downloaded
	// or a working folder made.
	present := make([]bool, len(m.Files))
	if err := p.checkTargets(ctx, m.Files, present, opts.Parallel); err != nil {
		return nil, err
	}
	if err := p.checkSpace(m.Files, present, opts.Parallel); err != nil {
		if errors.Is(statErr, fs.ErrNotExist) {
			os.Remove(dir) // made above, still empty: a refused pull leaves nothing
		}
		return nil, err
	}
	if err := prepareState(root, raw); err != nil {
		return nil, err
	}
	// The progress counts the bytes downloaded and, for compressed files, those restored.
	var work int64
	for i, f := range m.Files {
		work += f.StoredSize
		if !present[i] && f.Compression == CompressionZipNN {
			work += f.Size
		}
	}
	p.progress.AddTotal(work)

	res := &PullResult{URL: st.String(), Dir: dir, Files: make([]PullFile, len(m.Files)), Manifest: m}
	// Every file is verified in the state folder first; only then do they all get their final
	// names, the index last.
	stagedFiles := make([]staged, len(m.Files))
	err = forEach(ctx, len(m.Files), opts.Parallel, func(ctx context.Context, i int) error {
		f := m.Files[i]
		if present[i] {
			p.progress.Add(f.StoredSize)
			res.Files[i] = PullFile{Path: f.Path, Size: f.Size, StoredSize: f.StoredSize, Compression: f.Compression, Action: "present"}
			return nil
		}
		r, sf, err := p.pullFile(ctx, f)
		res.Files[i], stagedFiles[i] = r, sf
		return err
	})
	if err != nil && isNoSpace(err) {
		// Nothing can go on until space is freed: give back what the working folder holds.
		root.RemoveAll(pullState)
		return nil, fmt.Errorf("%w (the partial download in %s was removed to give the space back)", err, quote(path.Join(dir, pullState)))
	}
	if err != nil {
		return nil, err
	}
	if err := p.placeAll(m.Files, stagedFiles); err != nil {
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
	if b, err := readOwn(root, idFile, 1<<10); err != nil || strings.TrimSpace(string(b)) != id {
		if err := root.RemoveAll(pullState); err != nil {
			return fmt.Errorf("publish: clear %s: %w", pullState, err)
		}
	}
	if err := root.MkdirAll(pullState, 0o755); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	f, err := createFresh(root, idFile, os.O_WRONLY)
	if err == nil {
		_, err = f.WriteString(id + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// checkTargets looks at the final name of every file before anything is downloaded: a file
// with the published bytes is marked present; anything else in the way (another file, a
// directory, a file where a directory is needed, a FIFO) is a conflict, all of them reported.
func (p *puller) checkTargets(ctx context.Context, files []File, present []bool, parallel int) error {
	var (
		mu        sync.Mutex
		conflicts []string
	)
	err := forEach(ctx, len(files), parallel, func(ctx context.Context, i int) error {
		f := files[i]
		ok, err := p.isPresent(ctx, f)
		if errors.Is(err, ErrConflict) {
			mu.Lock()
			conflicts = append(conflicts, quote(f.Path))
			mu.Unlock()
			return nil
		}
		present[i] = ok
		return err
	})
	if err != nil {
		return err
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		more := ""
		if len(conflicts) > 5 {
			more = fmt.Sprintf(" and %d more", len(conflicts)-5)
			conflicts = conflicts[:5]
		}
		return fmt.Errorf("%w: in %s, %s%s already exist and are not the published files; move them away or pull into another directory (nothing was downloaded)",
			ErrConflict, quote(p.root.Name()), strings.Join(conflicts, ", "), more)
	}
	return nil
}

// isPresent says whether the final name of f holds the published bytes already; an error
// wrapping ErrConflict means something else is there.
func (p *puller) isPresent(ctx context.Context, f File) (bool, error) {
	fi, err := p.root.Stat(f.Path) // a link to the right bytes (inside DIR) will do
	if err != nil && !errors.Is(err, syscall.ENOTDIR) && p.somethingAt(f.Path) {
		// A link that leads out of DIR or nowhere, or a link or file where a parent directory
		// must go.
		return false, ErrConflict
	}
	if errors.Is(err, fs.ErrNotExist) {
		// A file where a parent directory must go is a conflict too.
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if di, err := p.root.Stat(d); err == nil && !di.IsDir() {
				return false, ErrConflict
			}
		}
		return false, nil
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return false, ErrConflict
	}
	if err != nil {
		return false, fmt.Errorf("publish: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return false, ErrConflict
	}
	file, err := p.root.OpenFile(f.Path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return false, ErrConflict
	}
	defer file.Close()
	if fi, err := file.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false, ErrConflict
	}
	// Checking a file already there is work of its own (a re-pull reads every file once).
	p.progress.AddTotal(f.Size)
	sha, err := hashReader(ctx, io.TeeReader(io.NewSectionReader(file, 0, f.Size), &progressWriter{w: io.Discard, p: p.progress}))
	if err != nil {
		return false, fmt.Errorf("publish: hash %s: %w", quote(f.Path), err)
	}
	if sha != f.SHA256 {
		return false, ErrConflict
	}
	return true, nil
}

// pullFile downloads and verifies f into the state folder and returns the verified file's name
// there; placeAll gives it its final name once every file is verified.
func (p *puller) pullFile(ctx context.Context, f File) (PullFile, staged, error) {
	r := PullFile{Path: f.Path, Size: f.Size, StoredSize: f.StoredSize, Compression: f.Compression}
	obj := stateName("obj", f.Key)
	if f.Compression == CompressionZipNN {
		// An earlier run may have restored this file already (and removed its object).
		if sf, ok := p.restored(ctx, f); ok {
			p.progress.Add(f.StoredSize + f.Size)
			r.Action = "resumed"
			return r, sf, nil
		}
	}
	want := f.storedSHA256()
	var out *os.File
	for attempt := 0; ; attempt++ {
		o, fetched, reused, n, err := p.download(ctx, f, obj)
		if err != nil {
			return r, staged{}, err
		}
		r.RangesFetched += fetched
		r.RangesReused += reused
		r.BytesRetrieved += n
		// The hash is of the open file, the one renamed into place later.
		sha, err := hashReader(ctx, io.NewSectionReader(o, 0, f.StoredSize))
		if err != nil {
			o.Close()
			return r, staged{}, fmt.Errorf("publish: hash %s: %w", quote(f.Key), err)
		}
		if sha == want {
			out = o
			break
		}
		o.Close()
		p.root.Remove(obj)
		p.root.Remove(obj + ".parts")
		if reused == 0 || attempt > 0 {
			return r, staged{}, fmt.Errorf("%w: %s/%s has sha256 %s, the manifest says %s", ErrCorrupt, p.st, quote(f.Key), sha, want)
		}
		p.log.Warn("resumed download does not verify; fetching again", "key", f.Key)
	}
	defer out.Close()
	r.Action = "downloaded"
	if r.RangesReused > 0 {
		r.Action = "resumed"
	}
	verified, name := out, obj
	if f.Compression == CompressionZipNN {
		name = stateName("raw", f.Path)
		raw, err := p.decompress(ctx, f, out, name)
		if err != nil {
			return r, staged{}, err
		}
		defer raw.Close()
		verified = raw
		// The restored file is verified: its object's space goes back now.
		p.root.Remove(obj)
		p.root.Remove(obj + ".parts")
	}
	vi, err := verified.Stat()
	if err != nil {
		return r, staged{}, fmt.Errorf("publish: %w", err)
	}
	return r, staged{name: name, info: vi}, nil
}

// restored returns the restored file of a compressed f that an earlier run left in the state
// folder, if it is pull's own and has the manifest's size and SHA-256.
func (p *puller) restored(ctx context.Context, f File) (staged, bool) {
	name := stateName("raw", f.Path)
	file, err := openOwn(p.root, name, os.O_RDONLY)
	if err != nil {
		return staged{}, false
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil || fi.Size() != f.Size {
		return staged{}, false
	}
	if sha, err := hashReader(ctx, io.NewSectionReader(file, 0, f.Size)); err != nil || sha != f.SHA256 {
		return staged{}, false
	}
	return staged{name: name, info: fi}, true
}

// hashReader returns the SHA-256 of what r yields.
func hashReader(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	if _, err := io.CopyBuffer(h, ctxReader{ctx, r}, *bp); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// decompress restores the original bytes of the verified container obj into a fresh file
// final, checking size and SHA-256; it returns that file, open. The container must promise exactly
// the manifest's size, so a container cannot make pull write more than that.
func (p *puller) decompress(ctx context.Context, f File, obj *os.File, final string) (*os.File, error) {
	if err := p.root.MkdirAll(path.Dir(final), 0o755); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	out, err := createFresh(p.root, final, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	fail := func(err error) (*os.File, error) {
		out.Close()
		p.root.Remove(final)
		return nil, err
	}
	h := sha256.New()
	ow := &writeErr{w: &progressWriter{w: out, p: p.progress}}
	bw := bufio.NewWriterSize(io.MultiWriter(ow, h), 1<<20)
	in := bufio.NewReaderSize(io.NewSectionReader(obj, 0, f.StoredSize), 1<<20)
	n, err := zipnn.Decompress(ctx, bw, in, zipnn.Options{CheckSize: true, Size: f.Size})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && ctx.Err() != nil {
		return fail(ctx.Err())
	}
	if ow.err != nil {
		// The disk refused the restored bytes (full, quota, I/O): not the object's fault.
		return fail(fmt.Errorf("publish: write %s (restoring %s): %w", final, quote(f.Path), ow.err))
	}
	if err != nil {
		return fail(fmt.Errorf("%w: %s: %v", ErrCorrupt, quote(f.Key), err))
	}
	if sha := hex.EncodeToString(h.Sum(nil)); n != f.Size || sha != f.SHA256 {
		return fail(fmt.Errorf("%w: %s decompresses to %d bytes with sha256 %s; the manifest says %d and %s", ErrCorrupt, quote(f.Key), n, sha, f.Size, f.SHA256))
	}
	if err := out.Sync(); err != nil {
		return fail(fmt.Errorf("publish: %w", err))
	}
	return out, nil
}

// writeErr remembers the first error of the writer it wraps.
type writeErr struct {
	w   io.Writer
	err error
}

// Write implements io.Writer.
func (e *writeErr) Write(b []byte) (int, error) {
	n, err := e.w.Write(b)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
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
