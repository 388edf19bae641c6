package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"pdq/internal/fsutil"
)

// sumsFormat names the layout of a sums record file.
const sumsFormat = "pdq-publish-sums/1"

// fileID identifies one version of a file without reading it (see identityOf).
type fileID struct {
	Size     int64  `json:"size"`
	ModNs    int64  `json:"mtime_ns"`
	ChangeNs int64  `json:"ctime_ns"`
	Inode    uint64 `json:"inode"`
	Device   uint64 `json:"device"`
}

// recordedSums are the sums of one file as a hash pass found them, with the file's identity
// before and after that pass (the same, or nothing is recorded).
type recordedSums struct {
	ID       fileID   `json:"id"`
	SHA256   string   `json:"sha256"`
	PartSize int64    `json:"part_size"`
	CRC32C   []uint32 `json:"crc32c"`
}

// sumsRecord is what earlier publishes of a directory learnt about its files, by manifest path.
// A file whose identity and part size match its entry is not read to be hashed again: a rerun
// of an interrupted publish, or a publish of the same files to another version, reads only
// what it sends. What is sent still carries the recorded CRC32C of each part, which the store
// checks against the bytes it receives, so a file changed behind an unchanged identity fails
// the upload (ErrChecksum) rather than being stored under a wrong hash.
type sumsRecord struct {
	path string
	mu   sync.Mutex
	// Format and Files are the file's contents.
	Format string                  `json:"format"`
	Files  map[string]recordedSums `json:"files"`
	dirty  bool
}

// DefaultSumsRecord returns where pdq publish keeps the sums record of the directory dir: a
// file under the user's cache directory named by dir's absolute path ("" when there is none).
func DefaultSumsRecord(dir string) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(cache, "pdq", "publish", hex.EncodeToString(sum[:16])+".json")
}

// loadSums reads the record at path; a missing, unreadable or foreign file is an empty record
// (it only ever saves reads).
func loadSums(path string, log *slog.Logger) *sumsRecord {
	r := &sumsRecord{path: path, Format: sumsFormat, Files: map[string]recordedSums{}}
	if path == "" {
		return r
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Debug("sums record unreadable; hashing every file", "file", path, "err", err)
		}
		return r
	}
	var got sumsRecord
	if err := json.Unmarshal(b, &got); err != nil || got.Format != sumsFormat || got.Files == nil {
		log.Debug("sums record not understood; hashing every file", "file", path, "err", err)
		return r
	}
	r.Files = got.Files
	return r
}

// lookup returns the recorded sums of the listed file f when its identity and part size match
// them.
func (r *sumsRecord) lookup(f localFile, partSize int64) (sums, bool) {
	if f.id == nil {
		return sums{}, false
	}
	id := *f.id
	r.mu.Lock()
	e, ok := r.Files[f.path]
	r.mu.Unlock()
	if !ok || e.ID != id || e.PartSize != partSizeFor(id.Size, partSize) || !validHex(e.SHA256) ||
		len(e.CRC32C) != max(1, int((id.Size+e.PartSize-1)/e.PartSize)) {
		return sums{}, false
	}
	return sums{size: id.Size, sha256: e.SHA256, partSize: e.PartSize, crcs: e.CRC32C}, true
}

// addListed records the sums of the listed file f, read while it had the identity it was
// listed with (nothing is recorded for a file of unknown identity).
func (r *sumsRecord) addListed(f localFile, s sums) {
	if f.id == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Files[f.path] = recordedSums{ID: *f.id, SHA256: s.sha256, PartSize: s.partSize, CRC32C: s.crcs}
	r.dirty = true
}

// save writes the record, atomically, when it learnt something; a failure only costs the next
// publish its reads, so it is logged, not returned.
func (r *sumsRecord) save(log *slog.Logger) {
	if r.path == "" || !r.dirty {
		return
	}
	err := os.MkdirAll(filepath.Dir(r.path), 0o755)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(r); err == nil {
			err = fsutil.WriteFileAtomic(r.path, b)
		}
	}
	if err != nil {
		log.Warn("could not save the sums record; the next publish hashes every file again", "file", r.path, "err", fmt.Errorf("publish: %w", err))
	}
}
