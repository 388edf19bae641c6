// Package localstore is the store.Store kept in a local directory: an object is a file under the
// root, so a published version is an ordinary checkpoint directory.
package localstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"pdq/internal/fsutil"
	"pdq/publish/store"
)

// Local is a store.Store kept in a directory: the object with key K is the file ROOT/K, so a published
// checkpoint is an ordinary directory. Its own state lives under ROOT/.pdq: metadata sidecars in
// meta/, temporary files in tmp/, multipart uploads in uploads/ID/. Every write goes to a temporary
// file that is fsynced and then renamed (or hard-linked, for IfNoneMatch) into place, and the
// directory is fsynced, so a crash never leaves a partial object under its key.
//
// Metadata is kept in a sidecar written just before the object is renamed into place (both under
// the store's metadata lock, which Stat takes too) and tied to the object's size and
// modification time: an object changed behind the store's back loses its metadata rather than
// keeping a checksum that no longer describes it.
type Local struct {
	root string
}

// Local implements store.Store.
var _ store.Store = (*Local)(nil)

// NewLocal returns the store rooted at dir. The directory is created on the first write.
func New(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("store: empty local directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", dir, err)
	}
	return &Local{root: abs}, nil
}

// String returns the store's file:// URL.
func (l *Local) String() string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(l.root)}).String()
}

// Root returns the directory the store keeps its objects in.
func (l *Local) Root() string { return l.root }

func (l *Local) path(key string) string { return filepath.Join(l.root, filepath.FromSlash(key)) }
func (l *Local) state(parts ...string) string {
	return filepath.Join(append([]string{l.root, store.ReservedPrefix}, parts...)...)
}

// maxSidecar bounds the metadata sidecar read (metadata is a few hundred bytes).
const maxSidecar = 1 << 20

// sidecar is the metadata file kept for an object.
type sidecar struct {
	Size     int64             `json:"size"`
	ModNano  int64             `json:"mtime_ns"`
	Metadata map[string]string `json:"metadata"`
}

// Stat implements store.Store.
func (l *Local) Stat(ctx context.Context, key string) (store.Info, error) {
	if err := store.ValidKey(key); err != nil {
		return store.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Info{}, err
	}
	fi, err := os.Stat(l.path(key))
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.Mode().IsRegular() {
		return store.Info{}, fmt.Errorf("%w: %s", store.ErrNotExist, key)
	}
	if err != nil {
		return store.Info{}, fmt.Errorf("store: stat %s: %w", key, err)
	}
	info := store.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime(), Metadata: map[string]string{}}
	unlock := l.lockMeta(false)
	defer unlock()
	if fi, err = os.Stat(l.path(key)); err != nil || !fi.Mode().IsRegular() { // again, under the lock
		return store.Info{}, fmt.Errorf("%w: %s", store.ErrNotExist, key)
	}
	info.Size, info.ModTime = fi.Size(), fi.ModTime()
	if b, err := fsutil.ReadRegularFile(l.state("meta", filepath.FromSlash(key)), maxSidecar); err == nil {
		var sc sidecar
		if json.Unmarshal(b, &sc) == nil && sc.Size == fi.Size() && sc.ModNano == fi.ModTime().UnixNano() {
			for k, v := range sc.Metadata {
				info.Metadata[k] = v
			}
		}
	}
	return info, nil
}

// Put implements store.Store.
func (l *Local) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts store.PutOptions) error {
	if err := store.ValidKey(key); err != nil {
		return err
	}
	if err := store.ValidMetadata(opts.Metadata); err != nil {
		return err
	}
	tmp, err := l.tempFile("put-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	crc, err := copyExact(ctx, tmp, r, size)
	if err == nil && opts.HasCRC32C && crc != opts.CRC32C {
		err = fmt.Errorf("%w: %s: got crc32c %08x, sent %08x", store.ErrChecksum, key, crc, opts.CRC32C)
	}
	if err != nil {
		tmp.Close()
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	return l.commit(tmp, key, opts)
}

// commit fsyncs and closes tmp and moves it to key, then records metadata.
func (l *Local) commit(tmp *os.File, key string, opts store.PutOptions) error {
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	dst := l.path(key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	meta := l.state("meta", filepath.FromSlash(key))
	// The sidecar is written first, tied to the temporary file's size and time (a rename or link
	// keeps both), so the object never appears without its metadata; a crash between the two
	// leaves a sidecar that matches no object.
	var sc []byte
	if len(opts.Metadata) > 0 {
		fi, err := os.Stat(tmp.Name())
		if err != nil {
			return fmt.Errorf("store: put %s: %w", key, err)
		}
		if sc, err = json.Marshal(sidecar{Size: fi.Size(), ModNano: fi.ModTime().UnixNano(), Metadata: opts.Metadata}); err != nil {
			return fmt.Errorf("store: put %s: %w", key, err)
		}
	}
	unlock := l.lockMeta(true)
	defer unlock()
	if opts.IfNoneMatch {
		if _, err := os.Lstat(dst); err == nil {
			return fmt.Errorf("%w: %s", store.ErrExists, key)
		}
	}
	if sc != nil {
		if err := l.writeFileAtomic(meta, sc); err != nil {
			return fmt.Errorf("store: put %s: metadata: %w", key, err)
		}
	} else if err := os.Remove(meta); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: put %s: %w", key, err) // old metadata must not describe new bytes
	}
	if opts.IfNoneMatch {
		// A hard link fails if the name exists: an atomic create-if-absent, also against
		// writers that take no lock.
		if err := os.Link(tmp.Name(), dst); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %s", store.ErrExists, key)
			}
			return fmt.Errorf("store: put %s: %w", key, err)
		}
	} else if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("store: put %s: %w", key, err)
	}
	return nil
}

// GetRange implements store.Store.
func (l *Local) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := store.ValidKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Never blocks on a FIFO under the key: only regular files are objects.
	f, err := fsutil.OpenRegular(l.path(key))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsutil.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %s", store.ErrNotExist, key)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s: not a regular file", store.ErrNotExist, key)
	}
	if off < 0 || off > fi.Size() {
		f.Close()
		return nil, fmt.Errorf("store: get %s: offset %d outside object of %d bytes", key, off, fi.Size())
	}
	if length < 0 {
		length = fi.Size() - off
	}
	return &rangeReader{r: io.NewSectionReader(f, off, length), left: length, f: f}, nil
}

// rangeReader yields exactly left bytes or fails with io.ErrUnexpectedEOF.
type rangeReader struct {
	r    io.Reader
	left int64
	f    *os.File
}

// Read implements io.Reader.
func (rr *rangeReader) Read(p []byte) (int, error) {
	if rr.left <= 0 {
		return 0, io.EOF
	}
	n, err := rr.r.Read(p)
	rr.left -= int64(n)
	if err == io.EOF && rr.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Close implements io.Closer.
func (rr *rangeReader) Close() error { return rr.f.Close() }

// List implements store.Store.
func (l *Local) List(ctx context.Context, prefix string, fn func(store.Info) error) error {
	err := filepath.WalkDir(l.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == l.root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(l.root, p)
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if key == store.ReservedPrefix {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := l.Stat(ctx, key)
		if err != nil {
			return err
		}
		return fn(info)
	})
	if err != nil {
		return fmt.Errorf("store: list %q: %w", prefix, err)
	}
	return nil
}

// Delete implements store.Store.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := store.ValidKey(key); err != nil {
		return err
	}
	if err := os.Remove(l.state("meta", filepath.FromSlash(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: delete %s: %w", key, err)
	}
	if err := os.Remove(l.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: delete %s: %w", key, err)
	}
	return nil
}

// tempFile creates a temporary file under ROOT/.pdq/tmp (same file system as the objects).
func (l *Local) tempFile(pattern string) (*os.File, error) {
	dir := l.state("tmp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return f, nil
}

// writeFileAtomic writes b to name through a fsynced temporary file and a rename.
func (l *Local) writeFileAtomic(name string, b []byte) error {
	tmp, err := l.tempFile("meta-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

// copyExact copies exactly size bytes of r to w, returning their CRC32C.
func copyExact(ctx context.Context, w io.Writer, r io.Reader, size int64) (uint32, error) {
	h := crc32.New(castagnoli)
	n, err := io.CopyBuffer(io.MultiWriter(w, h), ctxReader{ctx, io.LimitReader(r, size)}, make([]byte, 1<<20))
	if err != nil {
		return 0, err
	}
	if n != size {
		return 0, fmt.Errorf("short body: %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	return h.Sum32(), nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

// Read implements io.Reader.
func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// syncDir fsyncs a directory so a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}
