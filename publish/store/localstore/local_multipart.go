package localstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"pdq/internal/fsutil"
	"pdq/publish/store"
)

// A local multipart upload is the directory ROOT/.pdq/uploads/ID holding info.json (key,
// metadata, start time) and one file per part named pNNNNN.CCCCCCCC (part number, CRC32C in hex),
// each written to a temporary file, fsynced and renamed into place.

type uploadInfo struct {
	Key       string            `json:"key"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Initiated time.Time         `json:"initiated"`
}

func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

func (l *Local) uploadDir(key, id string) (string, error) {
	if err := store.ValidKey(key); err != nil {
		return "", err
	}
	if !validUploadID(id) {
		return "", fmt.Errorf("%w: upload %q of %s", store.ErrNotExist, id, key)
	}
	dir := l.state("uploads", id)
	b, err := fsutil.ReadRegularFile(filepath.Join(dir, "info.json"), maxSidecar)
	if err != nil {
		return "", fmt.Errorf("%w: upload %s of %s", store.ErrNotExist, id, key)
	}
	var info uploadInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Key != key {
		return "", fmt.Errorf("%w: upload %s of %s", store.ErrNotExist, id, key)
	}
	return dir, nil
}

// CreateMultipart implements store.Store.
func (l *Local) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if err := store.ValidKey(key); err != nil {
		return "", err
	}
	if err := store.ValidMetadata(opts.Metadata); err != nil {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	b, err := json.Marshal(uploadInfo{Key: key, Metadata: opts.Metadata, Initiated: time.Now().UTC()})
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	dir := l.state("uploads", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("store: create upload of %s: %w", key, err)
	}
	if err := l.writeFileAtomic(filepath.Join(dir, "info.json"), b); err != nil {
		return "", fmt.Errorf("store: create upload of %s: %w", key, err)
	}
	return id, nil
}

// ListUploads implements store.Store.
func (l *Local) ListUploads(ctx context.Context, key string) ([]store.Upload, error) {
	if err := store.ValidKey(key); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(l.state("uploads"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: list uploads of %s: %w", key, err)
	}
	var ups []store.Upload
	for _, e := range ents {
		b, err := fsutil.ReadRegularFile(l.state("uploads", e.Name(), "info.json"), maxSidecar)
		if err != nil {
			continue // an upload being created or aborted
		}
		var info uploadInfo
		if json.Unmarshal(b, &info) == nil && info.Key == key {
			ups = append(ups, store.Upload{Key: key, ID: e.Name(), Initiated: info.Initiated})
		}
	}
	sort.Slice(ups, func(i, j int) bool { return ups[i].Initiated.Before(ups[j].Initiated) })
	return ups, nil
}

// UploadPart implements store.Store.
func (l *Local) UploadPart(ctx context.Context, key, uploadID string, num int32, r io.ReadSeeker, size int64, crc32c uint32) (store.Part, error) {
	dir, err := l.uploadDir(key, uploadID)
	if err != nil {
		return store.Part{}, err
	}
	if num < 1 || num > store.MaxParts {
		return store.Part{}, fmt.Errorf("store: upload %s: part number %d outside 1..%d", key, num, store.MaxParts)
	}
	tmp, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return store.Part{}, partErr(key, num, err)
	}
	defer os.Remove(tmp.Name())
	crc, err := copyExact(ctx, tmp, r, size)
	if err == nil && crc != crc32c {
		err = fmt.Errorf("%w: got crc32c %08x, sent %08x", store.ErrChecksum, crc, crc32c)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return store.Part{}, fmt.Errorf("store: upload %s part %d: %w", key, num, err)
	}
	// The new part takes its name first (a rename replaces a part of the same bytes, uploaded
	// again by another writer, atomically), and only then do earlier parts of that number with
	// other bytes go: a listing or a completion running meanwhile never finds the part missing.
	name := filepath.Join(dir, fmt.Sprintf("p%05d.%08x", num, crc))
	if err := os.Rename(tmp.Name(), name); err != nil {
		return store.Part{}, partErr(key, num, err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("p%05d.*", num)))
	for _, o := range old {
		if o != name {
			os.Remove(o)
		}
	}
	return store.Part{Number: num, Size: size, ETag: fmt.Sprintf("%08x", crc), CRC32C: crc, HasCRC32C: true}, nil
}

// ListParts implements store.Store.
func (l *Local) ListParts(ctx context.Context, key, uploadID string) ([]store.Part, error) {
	dir, err := l.uploadDir(key, uploadID)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: list parts of %s: %w", key, err)
	}
	var parts []store.Part
	for _, e := range ents {
		num, crc, ok := parsePartName(e.Name())
		if !ok {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		parts = append(parts, store.Part{Number: num, Size: fi.Size(), ETag: fmt.Sprintf("%08x", crc), CRC32C: crc, HasCRC32C: true})
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Number < parts[j].Number })
	return parts, nil
}

func parsePartName(name string) (num int32, crc uint32, ok bool) {
	n, c, found := strings.Cut(name, ".")
	if !found || len(n) != 6 || n[0] != 'p' || len(c) != 8 {
		return 0, 0, false
	}
	nv, err1 := strconv.ParseUint(n[1:], 10, 32)
	cv, err2 := strconv.ParseUint(c, 16, 32)
	if err1 != nil || err2 != nil || nv < 1 || nv > store.MaxParts {
		return 0, 0, false
	}
	return int32(nv), uint32(cv), true
}

// CompleteMultipart implements store.Store.
func (l *Local) CompleteMultipart(ctx context.Context, key, uploadID string, parts []store.Part, opts store.PutOptions) error {
	dir, err := l.uploadDir(key, uploadID)
	if err != nil {
		return err
	}
	b, err := fsutil.ReadRegularFile(filepath.Join(dir, "info.json"), maxSidecar)
	if err != nil {
		return fmt.Errorf("%w: upload %s of %s", store.ErrNotExist, uploadID, key)
	}
	var info uploadInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("store: upload %s of %s: %w", uploadID, key, err)
	}
	have, err := l.ListParts(ctx, key, uploadID)
	if err != nil {
		return err
	}
	byNum := map[int32]store.Part{}
	for _, p := range have {
		byNum[p.Number] = p
	}
	if len(parts) == 0 {
		return fmt.Errorf("%w: %s: no parts", store.ErrInvalidPart, key)
	}
	tmp, err := l.tempFile("complete-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	prev := int32(0)
	for i, p := range parts {
		got, ok := byNum[p.Number]
		switch {
		case p.Number <= prev:
			err = fmt.Errorf("%w: %s: part %d out of order", store.ErrInvalidPart, key, p.Number)
		case !ok:
			err = fmt.Errorf("%w: %s: part %d not uploaded", store.ErrInvalidPart, key, p.Number)
		case got.ETag != p.ETag:
			err = fmt.Errorf("%w: %s: part %d has etag %s, not %s", store.ErrInvalidPart, key, p.Number, got.ETag, p.ETag)
		case i < len(parts)-1 && got.Size < store.MinPartSize:
			err = fmt.Errorf("%w: %s: part %d is %d bytes, under the %d minimum", store.ErrInvalidPart, key, p.Number, got.Size, store.MinPartSize)
		}
		if err == nil {
			err = appendFile(ctx, tmp, filepath.Join(dir, fmt.Sprintf("p%05d.%08x", got.Number, got.CRC32C)))
			if errors.Is(err, fs.ErrNotExist) { // another writer took the upload or the part meanwhile
				if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
					err = fmt.Errorf("%w: upload %s of %s: completed or aborted meanwhile", store.ErrNotExist, uploadID, key)
				} else {
					err = fmt.Errorf("%w: %s: part %d replaced meanwhile", store.ErrInvalidPart, key, p.Number)
				}
			}
		}
		if err != nil {
			tmp.Close()
			return err
		}
		prev = p.Number
	}
	opts.Metadata = info.Metadata
	if err := l.commit(tmp, key, opts); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

func appendFile(ctx context.Context, dst *os.File, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	src, err := fsutil.OpenRegular(name)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer src.Close()
	if _, err := io.Copy(dst, src); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// AbortMultipart implements store.Store.
func (l *Local) AbortMultipart(ctx context.Context, key, uploadID string) error {
	dir, err := l.uploadDir(key, uploadID)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("store: abort upload of %s: %w", key, err)
	}
	return nil
}

// partErr wraps a part's file error; a missing upload directory (the upload was completed or
// aborted by another writer meanwhile) is store.ErrNotExist, as S3's NoSuchUpload is.
func partErr(key string, num int32, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: upload %s part %d: %w", store.ErrNotExist, key, num, err)
	}
	return fmt.Errorf("store: upload %s part %d: %w", key, num, err)
}
