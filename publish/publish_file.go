package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"pdq/publish/store"
)

// publishFile maybe compresses, and uploads one file (hashed into s) under the folder of the
// checkpoint's content hash unless the store has it already.
func publishFile(ctx context.Context, up *uploader, f localFile, s sums, content string, opts Options) (File, FileResult, error) {
	plainKey := ObjectKey(ManifestFormat, content, f.path, false)
	e := File{Path: f.path, Size: s.size, SHA256: s.sha256, Compression: CompressionNone, Key: plainKey, StoredSize: s.size}
	r := FileResult{Path: f.path, Size: s.size, StoredSize: s.size, Compression: CompressionNone, Ratio: 1}
	md := map[string]string{metaSHA256: s.sha256, metaSize: strconv.FormatInt(s.size, 10)}

	if opts.Compress && compressible(f.path) {
		key := ObjectKey(ManifestFormat, content, f.path, true)
		if info, err := up.st.Stat(ctx, key); err == nil && info.Metadata[metaSHA256] == s.sha256 &&
			info.Metadata[metaCompression] == CompressionZipNN && validHex(info.Metadata[metaStoredSHA256]) {
			return compressedEntry(e, key, info.Size, info.Metadata[metaStoredSHA256]), skipped(up, r, info.Size, true), nil
		} else if err != nil && !errors.Is(err, store.ErrNotExist) {
			return File{}, FileResult{}, err
		}
		// One file compressed at a time (it uses every core), and at most two compressed copies
		// on disk: one being compressed while the previous one is uploaded.
		if err := up.tempSlots.Acquire(ctx); err != nil {
			return File{}, FileResult{}, err
		}
		defer up.tempSlots.Release()
		up.compressMu.Lock()
		tmp, zs, err := compressFile(ctx, f.local, opts.TempDir, 0)
		up.compressMu.Unlock()
		if err != nil {
			return File{}, FileResult{}, err
		}
		defer os.Remove(tmp)
		opts.Log.Debug("compressed", "path", f.path, "ratio", zs.Ratio())
		if zs.StoredSize < s.size {
			cs, err := hashFile(ctx, tmp, opts.PartSize)
			if err != nil {
				return File{}, FileResult{}, err
			}
			md[metaCompression], md[metaStoredSHA256] = CompressionZipNN, cs.sha256
			up.progress.AddTotal(cs.size - s.size)
			e = compressedEntry(e, key, cs.size, cs.sha256)
			r.Compression, r.StoredSize, r.Ratio = CompressionZipNN, cs.size, float64(s.size)/float64(max(cs.size, 1))
			stats, err := up.uploadOrAdopt(ctx, key, tmp, cs, md)
			if err != nil {
				return File{}, FileResult{}, err
			}
			return e, sent(r, stats), nil
		}
		opts.Log.Info("compression does not pay; storing as is", "path", f.path)
	}

	if info, err := up.st.Stat(ctx, plainKey); err == nil && info.Size == s.size &&
		info.Metadata[metaSHA256] == s.sha256 && info.Metadata[metaCompression] == "" {
		return e, skipped(up, r, s.size, false), nil
	} else if err != nil && !errors.Is(err, store.ErrNotExist) {
		return File{}, FileResult{}, err
	}
	stats, err := up.uploadOrAdopt(ctx, plainKey, f.local, s, md)
	if err != nil {
		return File{}, FileResult{}, err
	}
	return e, sent(r, stats), nil
}

// uploadOrAdopt uploads a file; when that fails, and the store now holds the same bytes under the
// key anyway (a concurrent publish of the same content wrote them, completing or aborting the
// uploads this one was using), that object is taken as this file's. The upload is tried twice.
func (u *uploader) uploadOrAdopt(ctx context.Context, key, local string, s sums, md map[string]string) (sendStats, error) {
	var err error
	for range 2 {
		var st sendStats
		if st, err = u.upload(ctx, key, local, s, md); err == nil || ctx.Err() != nil {
			return st, err
		}
		if errors.Is(err, store.ErrChecksum) {
			// The bytes read now are not those hashed: sending them again cannot help.
			return sendStats{}, fmt.Errorf("publish: %s changed after it was hashed (or since the sums record saw it): %w", quote(local), err)
		}
		info, serr := u.st.Stat(ctx, key)
		if serr == nil && info.Size == s.size && info.Metadata[metaSHA256] == md[metaSHA256] &&
			info.Metadata[metaStoredSHA256] == md[metaStoredSHA256] {
			u.log.Info("another publish stored the same bytes; using its object", "key", key, "upload_error", err)
			return sendStats{}, nil
		}
		u.log.Warn("upload failed; trying once more", "key", key, "err", err)
	}
	return sendStats{}, err
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

func sent(r FileResult, s sendStats) FileResult {
	r.Action, r.PartsSent, r.PartsReused = "uploaded", s.partsSent, s.partsReused
	if s.resumed {
		r.Action = "resumed"
	}
	return r
}
