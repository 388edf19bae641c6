package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"pdq/internal/par"
	"pdq/publish/store"

	"pdq/safetensors"
)

// Progress receives byte counts as work is done; implementations must be safe for concurrent use.
type Progress interface {
	// AddTotal grows (or shrinks) the amount of work expected.
	AddTotal(n int64)
	// Add records n bytes done.
	Add(n int64)
}

type noProgress struct{}

// AddTotal implements Progress.
func (noProgress) AddTotal(int64) {}

// Add implements Progress.
func (noProgress) Add(int64) {}

// uploader sends local files to a store: small ones in one request, large ones in parts read
// straight from the file through io.SectionReader (memory does not grow with the file), several
// at once, each with its CRC32C. An interrupted multipart upload is resumed: the parts the store
// already holds with the right size and CRC32C are kept and only the others are sent.
type uploader struct {
	st       store.Store // limited: it bounds the requests in flight, across files
	parallel int         // parts of one file handed to the store at once
	progress Progress
	onPart   func(key string, part int32)
	log      *slog.Logger

	bytesSent  atomic.Int64
	compressMu sync.Mutex
	tempSlots  par.Sem // bounds the compressed temporary files on disk
}

// sendStats counts what one file's upload did.
type sendStats struct {
	partsSent, partsReused int
	resumed                bool
}

// upload stores the local file (described by s) under key with metadata md.
func (u *uploader) upload(ctx context.Context, key, local string, s sums, md map[string]string) (sendStats, error) {
	f, err := safetensors.OpenRegular(local)
	if err != nil {
		return sendStats{}, fmt.Errorf("publish: %w", err)
	}
	defer f.Close()
	if len(s.crcs) <= 1 {
		err := u.st.Put(ctx, key, io.NewSectionReader(f, 0, s.size), s.size,
			store.PutOptions{Metadata: md, CRC32C: s.crcs[0], HasCRC32C: true})
		if err != nil {
			return sendStats{}, err
		}
		u.bytesSent.Add(s.size)
		u.progress.Add(s.size)
		return sendStats{partsSent: 1}, nil
	}
	st, err := u.multipart(ctx, key, f, s, md, true)
	if errors.Is(err, errRestart) {
		u.log.Warn("restarting upload from scratch", "key", key, "why", err)
		st, err = u.multipart(ctx, key, f, s, md, false)
	}
	return st, err
}

// errRestart asks for a fresh upload: the resumed one vanished or produced the wrong object.
var errRestart = errors.New("publish: resumed upload unusable")

func (u *uploader) multipart(ctx context.Context, key string, f *os.File, s sums, md map[string]string, resume bool) (sendStats, error) {
	var st sendStats
	id, have := "", map[int32]store.Part{}
	if resume {
		ups, err := u.st.ListUploads(ctx, key)
		if err != nil {
			return st, err
		}
		if len(ups) > 0 {
			id = ups[len(ups)-1].ID // the newest
			parts, err := u.st.ListParts(ctx, key, id)
			if errors.Is(err, store.ErrNotExist) {
				id = ""
			} else if err != nil {
				return st, err
			}
			for _, p := range parts {
				have[p.Number] = p
			}
		}
	}
	if id == "" {
		var err error
		if id, err = u.st.CreateMultipart(ctx, key, store.PutOptions{Metadata: md}); err != nil {
			return st, err
		}
	} else {
		st.resumed = true
	}

	parts := make([]store.Part, len(s.crcs))
	var todo []int
	for i, crc := range s.crcs {
		p, ok := have[int32(i+1)]
		if ok && p.Size == s.partLen(i) && p.HasCRC32C && p.CRC32C == crc {
			parts[i] = p
			st.partsReused++
			u.progress.Add(p.Size)
			continue
		}
		todo = append(todo, i)
	}
	if st.resumed {
		u.log.Info("resuming upload", "key", key, "parts_kept", st.partsReused, "parts_to_send", len(todo))
	}

	err := forEach(ctx, len(todo), u.parallel, func(ctx context.Context, k int) error {
		i := todo[k]
		off, n := int64(i)*s.partSize, s.partLen(i)
		p, err := u.st.UploadPart(ctx, key, id, int32(i+1), io.NewSectionReader(f, off, n), n, s.crcs[i])
		if err != nil {
			if errors.Is(err, store.ErrNotExist) && st.resumed {
				err = fmt.Errorf("%w: %v", errRestart, err)
			}
			return err
		}
		parts[i] = p
		u.bytesSent.Add(n)
		u.progress.Add(n)
		if u.onPart != nil {
			u.onPart(key, int32(i+1))
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	st.partsSent = len(todo)
	if err := u.st.CompleteMultipart(ctx, key, id, parts, store.PutOptions{}); err != nil {
		if st.resumed && (errors.Is(err, store.ErrInvalidPart) || errors.Is(err, store.ErrNotExist)) {
			return st, fmt.Errorf("%w: %v", errRestart, err)
		}
		return st, err
	}
	// A resumed upload carries the metadata it was created with: make sure it describes these bytes.
	info, err := u.st.Stat(ctx, key)
	if err != nil {
		return st, err
	}
	if info.Size != s.size || info.Metadata[metaSHA256] != md[metaSHA256] || info.Metadata[metaStoredSHA256] != md[metaStoredSHA256] {
		if st.resumed {
			return st, fmt.Errorf("%w: object has size %d and sha256 %q after completing", errRestart, info.Size, info.Metadata[metaSHA256])
		}
		return st, fmt.Errorf("publish: %s: stored object has size %d and sha256 %q, want %d and %s", key, info.Size, info.Metadata[metaSHA256], s.size, md[metaSHA256])
	}
	// Uploads of the same key left by earlier runs are of no further use.
	if ups, err := u.st.ListUploads(ctx, key); err == nil {
		for _, up := range ups {
			if err := u.st.AbortMultipart(ctx, key, up.ID); err != nil {
				u.log.Warn("could not abort a stale upload", "key", key, "upload", up.ID, "err", err)
			}
		}
	}
	return st, nil
}
