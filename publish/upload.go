package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"

	"pdq/internal/par"
	"pdq/publish/store"
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

// uploader sends local files to a store, reading each byte once: part after part, in order,
// into a buffer that is hashed (the file's SHA-256, the part's CRC32C) and then sent from memory
// while the next part is read. Small files go up in one request, large ones in parts, several
// at once, each with its CRC32C. An interrupted multipart upload is resumed: the parts the store
// already holds with the right size and CRC32C are kept and only the others are sent.
type uploader struct {
	st       store.Store // limited: it bounds the requests in flight, across files
	bufs     bufPool     // the part buffers, across files: memory is parallel × part size
	progress Progress
	onPart   func(key string, part int32)
	log      *slog.Logger

	bytesSent  atomic.Int64
	compressMu sync.Mutex
	tempSlots  par.Sem // bounds the compressed temporary files on disk
}

// bufPool hands out at most n buffers at a time, each kept for reuse once made.
type bufPool chan []byte

func newBufPool(n int) bufPool {
	p := make(bufPool, max(n, 1))
	for range cap(p) {
		p <- nil
	}
	return p
}

// get waits for a free buffer and returns it with length n.
func (p bufPool) get(ctx context.Context, n int64) ([]byte, error) {
	select {
	case b := <-p:
		if int64(cap(b)) < n {
			b = make([]byte, n)
		}
		return b[:n], nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p bufPool) put(b []byte) { p <- b }

// sendStats counts what one file's upload did.
type sendStats struct {
	partsSent, partsReused int
	resumed                bool
	bytesRead              int64 // of the local file
}

// errChanged: a local file is not the one listed (or hashed) any more.
var errChanged = errors.New("publish: file changed while being published")

// errRestart asks for a fresh upload: the resumed one vanished or produced the wrong object.
var errRestart = errors.New("publish: resumed upload unusable")

// openListed opens the local file f and checks it is still the file listed (its identity, when
// known, is unchanged).
func openListed(f localFile) (localSource, os.FileInfo, error) {
	file, err := openSource(f.local)
	if err != nil {
		return nil, nil, fmt.Errorf("publish: %w", err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("publish: %w", err)
	}
	if err := sameIdentity(f, fi); err != nil {
		file.Close()
		return nil, nil, err
	}
	return file, fi, nil
}

// sameIdentity fails with errChanged unless fi is the identity f was listed with (when known).
func sameIdentity(f localFile, fi os.FileInfo) error {
	if f.id == nil {
		return nil
	}
	if now, ok := identityOf(fi); !ok || now != *f.id {
		return fmt.Errorf("%w: %s (run again to publish it as it is now)", errChanged, quote(f.local))
	}
	return nil
}

// send stores the local file f under key with metadata md, reading each of its bytes at most
// once. known, when not nil, are the file's sums as the sums record has them: then nothing is
// hashed, parts go up with the recorded CRC32Cs (the store checks them, so bytes changed behind
// an unchanged identity fail with store.ErrChecksum) and parts an unfinished upload holds with
// those CRCs are not even read. Otherwise the SHA-256 and part CRCs are computed as the parts are
// read, and returned. md gets the file's sha256 when it is known before the object is created
// (known sums, or a file of one part); resume looks for an unfinished upload of key first.
func (u *uploader) send(ctx context.Context, key string, f localFile, partSize int64, known *sums, md map[string]string, resume bool) (sums, sendStats, error) {
	var st sendStats
	file, fi, err := openListed(f)
	if err != nil {
		return sums{}, st, err
	}
	defer file.Close()
	s := sums{size: fi.Size(), partSize: partSizeFor(fi.Size(), partSize)}
	if known != nil {
		if known.size != s.size || known.partSize != s.partSize {
			return sums{}, st, fmt.Errorf("%w: %s has %d bytes, %d were recorded", errChanged, quote(f.local), s.size, known.size)
		}
		s = *known
	}
	md = maps.Clone(md)
	if known != nil && md[metaSHA256] == "" {
		md[metaSHA256] = known.sha256
	}
	var h hash.Hash
	if known == nil {
		h = sha256.New()
	}
	if s.size <= s.partSize {
		err = u.sendWhole(ctx, key, file, &s, h, md, &st)
	} else {
		err = u.sendParts(ctx, key, file, &s, h, md, resume, &st)
	}
	if err != nil {
		return sums{}, st, err
	}
	// The bytes sent are those of the listed file only if it did not change while they were read.
	if after, err := file.Stat(); err != nil {
		return sums{}, st, fmt.Errorf("publish: %w", err)
	} else if err := sameIdentity(f, after); err != nil {
		return sums{}, st, err
	}
	return s, st, nil
}

// readPart reads part i of the file into a buffer from the pool, hashing it when h is not nil
// (then the part's CRC32C is appended to s.crcs).
func (u *uploader) readPart(ctx context.Context, file localSource, s *sums, i int, h hash.Hash, st *sendStats) ([]byte, error) {
	buf, err := u.bufs.get(ctx, s.partLen(i))
	if err != nil {
		return nil, err
	}
	// Read and hash a piece at a time, so that the hashes find it in the CPU's cache.
	var crc uint32
	off := int64(i) * s.partSize
	for done := 0; ; {
		b := buf[done:min(len(buf), done+readPiece)]
		n, err := file.ReadAt(b, off+int64(done))
		st.bytesRead += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
			u.bufs.put(buf)
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: %s got shorter while being read", errChanged, quote(file.Name()))
			}
			return nil, fmt.Errorf("publish: read %s: %w", quote(file.Name()), err)
		}
		if h != nil {
			h.Write(b)
			crc = crc32.Update(crc, castagnoli, b)
		}
		if done += n; done >= len(buf) {
			break
		}
	}
	if h != nil {
		s.crcs = append(s.crcs, crc)
	}
	return buf, nil
}

// readPiece is how much of a part is read and hashed at a time.
const readPiece = 1 << 20

// sendWhole stores a file of at most one part in one request.
func (u *uploader) sendWhole(ctx context.Context, key string, file localSource, s *sums, h hash.Hash, md map[string]string, st *sendStats) error {
	buf, err := u.readPart(ctx, file, s, 0, h, st)
	if err != nil {
		return err
	}
	defer u.bufs.put(buf)
	if h != nil {
		s.sha256 = hex.EncodeToString(h.Sum(nil))
		md[metaSHA256] = s.sha256
	}
	err = u.st.Put(ctx, key, bytes.NewReader(buf), s.size, store.PutOptions{Metadata: md, CRC32C: s.crcs[0], HasCRC32C: true})
	if err != nil {
		return err
	}
	u.bytesSent.Add(s.size)
	u.progress.Add(s.size)
	st.partsSent = 1
	return nil
}

// sendParts stores a file of several parts through a multipart upload, reading the parts in
// order and sending each from its buffer while the next ones are read.
func (u *uploader) sendParts(ctx context.Context, key string, file localSource, s *sums, h hash.Hash, md map[string]string, resume bool, st *sendStats) error {
	id, have := "", map[int32]store.Part{}
	if resume {
		ups, err := u.st.ListUploads(ctx, key)
		if err != nil {
			return err
		}
		if len(ups) > 0 {
			id = ups[len(ups)-1].ID // the newest
			parts, err := u.st.ListParts(ctx, key, id)
			if errors.Is(err, store.ErrNotExist) {
				id = ""
			} else if err != nil {
				return err
			}
			for _, p := range parts {
				have[p.Number] = p
			}
		}
	}
	if id == "" {
		var err error
		if id, err = u.st.CreateMultipart(ctx, key, store.PutOptions{Metadata: md}); err != nil {
			return err
		}
	} else {
		st.resumed = true
	}

	n := int((s.size + s.partSize - 1) / s.partSize)
	parts := make([]store.Part, n)
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sent     atomic.Int32
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		mu.Unlock()
	}
	kept := func(i int, crc uint32) bool {
		p, ok := have[int32(i+1)]
		if ok && p.Size == s.partLen(i) && p.HasCRC32C && p.CRC32C == crc {
			parts[i] = p
			st.partsReused++
			u.progress.Add(p.Size)
			return true
		}
		return false
	}
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		if h == nil && kept(i, s.crcs[i]) { // known sums: a kept part is not read
			continue
		}
		buf, err := u.readPart(gctx, file, s, i, h, st)
		if err != nil {
			fail(err)
			break
		}
		if h != nil && kept(i, s.crcs[i]) {
			u.bufs.put(buf)
			continue
		}
		crc := s.crcs[i] // s.crcs grows meanwhile
		wg.Go(func() {
			defer u.bufs.put(buf)
			p, err := u.st.UploadPart(gctx, key, id, int32(i+1), bytes.NewReader(buf), int64(len(buf)), crc)
			if err != nil {
				if errors.Is(err, store.ErrNotExist) && st.resumed {
					err = fmt.Errorf("%w: %v", errRestart, err)
				}
				fail(err)
				return
			}
			parts[i] = p
			sent.Add(1)
			u.bytesSent.Add(int64(len(buf)))
			u.progress.Add(int64(len(buf)))
			if u.onPart != nil {
				u.onPart(key, int32(i+1))
			}
		})
	}
	wg.Wait()
	st.partsSent = int(sent.Load())
	if err := ctx.Err(); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	if h != nil {
		s.sha256 = hex.EncodeToString(h.Sum(nil))
	}
	if err := u.st.CompleteMultipart(ctx, key, id, parts, store.PutOptions{}); err != nil {
		if st.resumed && (errors.Is(err, store.ErrInvalidPart) || errors.Is(err, store.ErrNotExist)) {
			return fmt.Errorf("%w: %v", errRestart, err)
		}
		return err
	}
	// A resumed upload carries the metadata it was created with: make sure it describes these bytes.
	info, err := u.st.Stat(ctx, key)
	if err != nil {
		return err
	}
	if !describes(info, s.size, s.sha256, md) {
		if st.resumed {
			return fmt.Errorf("%w: object has size %d and metadata %v after completing", errRestart, info.Size, info.Metadata)
		}
		return fmt.Errorf("publish: %s: stored object has size %d and metadata %v, want %d bytes of sha256 %s", key, info.Size, info.Metadata, s.size, s.sha256)
	}
	// Uploads of the same key left by earlier runs are of no further use.
	if ups, err := u.st.ListUploads(ctx, key); err == nil {
		for _, up := range ups {
			if err := u.st.AbortMultipart(ctx, key, up.ID); err != nil {
				u.log.Warn("could not abort a stale upload", "key", key, "upload", up.ID, "err", err)
			}
		}
	}
	return nil
}

// describes says whether a stored object is the one a publish with metadata md writes for
// size stored bytes of a file with this SHA-256 (md's sha256 when it has one): same size and
// metadata, where an uncompressed object may lack the sha256 (a multipart upload begins before
// the file is hashed).
func describes(info store.Info, size int64, sha string, md map[string]string) bool {
	if md[metaSHA256] != "" {
		sha = md[metaSHA256]
	}
	got := info.Metadata
	return info.Size == size && got[metaSize] == md[metaSize] && got[metaCompression] == md[metaCompression] &&
		got[metaStoredSHA256] == md[metaStoredSHA256] && (got[metaSHA256] == sha || got[metaSHA256] == "" && md[metaCompression] == "")
}
