package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"pdq/publish/store"
)

// fileOutcome is what publishing one file gave: its manifest entry, its result, and the bytes of
// it that were hashed.
type fileOutcome struct {
	entry  File
	result FileResult
	hashed int64
}

// publishFile maybe compresses, and uploads one file under the publish's folder unless the store
// has it already. An uncompressed file is read once, hashed while it is sent; none of it is read
// when the sums record vouches for it and the store holds it.
func publishFile(ctx context.Context, up *uploader, f localFile, folder string, rec *sumsRecord, opts Options) (fileOutcome, error) {
	var o fileOutcome
	o.result = FileResult{Path: f.path, Size: f.size, StoredSize: f.size, Compression: CompressionNone, Ratio: 1}
	known, ok := rec.lookup(f, opts.PartSize)
	var s *sums
	if ok {
		s = &known
	}
	// hashed returns the file's sums: recorded, or from a pass that reads it (and records them);
	// a pass that is work of its own (before compressing) counts in the progress.
	hashed := func(counted bool) (sums, error) {
		if s != nil {
			return *s, nil
		}
		var p Progress
		if counted {
			up.progress.AddTotal(f.size)
			p = up.progress
		}
		h, err := hashListed(ctx, f, opts.PartSize, p)
		o.result.BytesRead += h.size
		if err != nil {
			return sums{}, err
		}
		o.hashed += h.size
		rec.addListed(f, h)
		s = &h
		return h, nil
	}
	md := map[string]string{metaSize: strconv.FormatInt(f.size, 10)}

	if opts.Compress && compressible(f.path) {
		fs, err := hashed(true)
		if err != nil {
			return o, err
		}
		md[metaSHA256] = fs.sha256
		o.entry = File{Path: f.path, Size: fs.size, SHA256: fs.sha256, Compression: CompressionNone, Key: ObjectKey(ManifestFormat, folder, f.path, false), StoredSize: fs.size}
		key := ObjectKey(ManifestFormat, folder, f.path, true)
		if info, err := up.st.Stat(ctx, key); err == nil && info.Metadata[metaSHA256] == fs.sha256 &&
			info.Metadata[metaCompression] == CompressionZipNN && validHex(info.Metadata[metaStoredSHA256]) {
			o.entry = compressedEntry(o.entry, key, info.Size, info.Metadata[metaStoredSHA256])
			o.result = skipped(up, o.result, info.Size, true)
			return o, nil
		} else if err != nil && !errors.Is(err, store.ErrNotExist) {
			return o, err
		}
		// One file compressed at a time (it uses every core), and at most two compressed copies
		// on disk: one being compressed while the previous one is uploaded.
		if err := up.tempSlots.Acquire(ctx); err != nil {
			return o, err
		}
		defer up.tempSlots.Release()
		up.compressMu.Lock()
		up.progress.AddTotal(f.size)
		tmp, zs, err := compressFile(ctx, f.local, opts.TempDir, 0, up.progress)
		up.compressMu.Unlock()
		o.result.BytesRead += f.size
		if err != nil {
			return o, err
		}
		defer os.Remove(tmp)
		if fi, err := os.Stat(f.local); err != nil {
			return o, fmt.Errorf("publish: %w", err)
		} else if err := sameIdentity(f, fi); err != nil {
			return o, err
		}
		opts.Log.Debug("compressed", "path", f.path, "ratio", zs.Ratio())
		if zs.StoredSize < fs.size {
			cs, err := hashFile(ctx, tmp, opts.PartSize, nil)
			if err != nil {
				return o, err
			}
			md[metaCompression], md[metaStoredSHA256] = CompressionZipNN, cs.sha256
			up.progress.AddTotal(cs.size - fs.size)
			o.entry = compressedEntry(o.entry, key, cs.size, cs.sha256)
			r := &o.result
			r.Compression, r.StoredSize, r.Ratio = CompressionZipNN, cs.size, float64(fs.size)/float64(max(cs.size, 1))
			_, stats, err := up.sendOrAdopt(ctx, key, localFile{path: f.path, local: tmp, size: cs.size}, opts.PartSize, &cs, md)
			if err != nil {
				return o, err
			}
			stats.bytesRead = 0 // of the temporary file
			o.result = sent(o.result, stats, o.result.BytesRead)
			return o, nil
		}
		opts.Log.Info("compression does not pay; storing as is", "path", f.path)
	}

	plainKey := ObjectKey(ManifestFormat, folder, f.path, false)
	if info, err := up.st.Stat(ctx, plainKey); err == nil && info.Size == f.size &&
		info.Metadata[metaSize] == md[metaSize] && info.Metadata[metaCompression] == "" {
		// Stored by an earlier run of this publish (the folder is of these files): the object
		// is taken once the file's sums say it holds these bytes.
		fs, err := hashed(false)
		if err != nil {
			return o, err
		}
		if describes(info, fs.size, fs.sha256, md) {
			o.entry = File{Path: f.path, Size: fs.size, SHA256: fs.sha256, Compression: CompressionNone, Key: plainKey, StoredSize: fs.size}
			o.result = skipped(up, o.result, fs.size, false)
			return o, nil
		}
	} else if err != nil && !errors.Is(err, store.ErrNotExist) {
		return o, err
	}
	fs, stats, err := up.sendOrAdopt(ctx, plainKey, f, opts.PartSize, s, md)
	if err != nil {
		return o, err
	}
	if s == nil {
		o.hashed += fs.size
		rec.addListed(f, fs)
	}
	o.entry = File{Path: f.path, Size: fs.size, SHA256: fs.sha256, Compression: CompressionNone, Key: plainKey, StoredSize: fs.size}
	o.result = sent(o.result, stats, o.result.BytesRead)
	return o, nil
}

// hashListed reads the local file f once for its sums, failing with errChanged unless it is the
// file listed, unchanged while it was read.
func hashListed(ctx context.Context, f localFile, partSize int64, p Progress) (sums, error) {
	s, err := hashFile(ctx, f.local, partSize, p)
	if err != nil {
		return s, err
	}
	if f.id != nil && (s.id == nil || *s.id != *f.id) {
		return sums{size: s.size}, fmt.Errorf("%w: %s (run again to publish it as it is now)", errChanged, quote(f.local))
	}
	return s, nil
}

// sendOrAdopt sends a file; when that fails, and the store now holds the same bytes under the
// key anyway (a concurrent publish of the same files wrote them, completing or aborting the
// upload this one was using), that object is taken as this file's. The upload is tried twice.
func (u *uploader) sendOrAdopt(ctx context.Context, key string, f localFile, partSize int64, known *sums, md map[string]string) (sums, sendStats, error) {
	var read int64
	resume := true
	var err error
	for attempt := range 2 {
		var s sums
		var st sendStats
		s, st, err = u.send(ctx, key, f, partSize, known, md, resume)
		read += st.bytesRead
		st.bytesRead = read
		if err == nil || ctx.Err() != nil {
			return s, st, err
		}
		if errors.Is(err, store.ErrChecksum) {
			// The bytes read now are not those hashed: sending them again cannot help.
			return sums{}, st, fmt.Errorf("publish: %s changed after it was hashed (or since the sums record saw it): %w", quote(f.local), err)
		}
		if errors.Is(err, errChanged) || permanent(err) {
			return sums{}, st, err
		}
		if info, serr := u.st.Stat(ctx, key); serr == nil && info.Size == f.size {
			sk := known
			if sk == nil {
				hs, herr := hashListed(ctx, f, partSize, nil)
				read += hs.size
				if herr != nil {
					return sums{}, sendStats{bytesRead: read}, herr
				}
				sk = &hs
			}
			if describes(info, sk.size, sk.sha256, md) {
				u.log.Info("another publish stored the same bytes; using its object", "key", key, "upload_error", err)
				return *sk, sendStats{bytesRead: read}, nil
			}
		}
		resume = !errors.Is(err, errRestart)
		if attempt == 0 {
			u.log.Warn("upload failed; trying once more", "key", key, "err", err)
		}
	}
	return sums{}, sendStats{bytesRead: read}, err
}

func compressedEntry(e File, key string, storedSize int64, storedSHA string) File {
	e.Compression, e.Key, e.StoredSize, e.StoredSHA256 = CompressionZipNN, key, storedSize, storedSHA
	return e
}

func skipped(up *uploader, r FileResult, stored int64, compressed bool) FileResult {
	up.progress.AddTotal(stored - r.Size)
	up.progress.Add(stored)
	if compressed {
		r.Compression, r.StoredSize, r.Ratio = CompressionZipNN, stored, float64(r.Size)/float64(max(stored, 1))
	}
	r.Action = "skipped"
	return r
}

// sent fills in what an upload did; read counts the local file's bytes read besides the upload's.
func sent(r FileResult, s sendStats, read int64) FileResult {
	r.Action, r.PartsSent, r.PartsReused = "uploaded", s.partsSent, s.partsReused
	r.BytesRead = read + s.bytesRead
	if s.resumed {
		r.Action = "resumed"
	}
	return r
}

// permanent says whether an upload error would only happen again if the upload were tried once
// more on the spot: refused credentials, a missing bucket, a server that stopped answering or
// cannot be reached (the store tried each request already), or a file system that refuses the
// write (the local store's: no space, read-only, no permission, an I/O error).
func permanent(err error) bool {
	for _, e := range []error{store.ErrAuth, store.ErrNoBucket, store.ErrStalled, store.ErrUnreachable, store.ErrInvalidKey,
		syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EACCES, syscall.EPERM, syscall.EIO, syscall.ENAMETOOLONG} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
