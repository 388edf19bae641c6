package convert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"pdq/quantize"
	"pdq/safetensors"
)

// JournalName is the file in the output directory that records finished shards, so that a rerun
// resumes where an interrupted one stopped.
const JournalName = ".pdq-journal.json"

// record is a finished report row with the sums that rebuild the summary on resume.
type record struct {
	Row TensorReport      `json:"row"`
	M   quantize.Metrics  `json:"m"`
	RTN *quantize.Metrics `json:"rtn,omitempty"`
}

// finishedShard is one journal entry.
type finishedShard struct {
	Key     string   `json:"key,omitempty"` // set in the file, the map key in memory
	Size    int64    `json:"size"`
	SHA256  string   `json:"sha256"`
	Records []record `json:"records,omitempty"`
}

// journal lists finished shards by output-relative path ("decode/model-00001-of-00009.safetensors").
// On disk it is JSON lines: a first line with the plan ID, then one line per finished shard,
// appended and synced as each shard completes, so recording a shard costs its own line only. A
// line torn by a crash ends the journal: the shards after it are redone.
type journal struct {
	PlanID string
	Shards map[string]*finishedShard
}

// journalHead is the first line of the journal file.
type journalHead struct {
	PlanID string `json:"plan_id"`
}

// loadJournal reads the journal; a missing file is an empty journal.
func loadJournal(dir string) (*journal, error) {
	j := &journal{Shards: map[string]*finishedShard{}}
	b, err := os.ReadFile(filepath.Join(dir, JournalName))
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	lines := bytes.Split(b, []byte("\n"))
	var head journalHead
	if err := json.Unmarshal(lines[0], &head); err != nil {
		return nil, fmt.Errorf("convert: %s: %w (delete it or use --force to start over)", filepath.Join(dir, JournalName), err)
	}
	j.PlanID = head.PlanID
	for _, line := range lines[1:] {
		var fs finishedShard
		if len(line) == 0 || json.Unmarshal(line, &fs) != nil || fs.Key == "" {
			break // the end, or a line torn by a crash
		}
		key := fs.Key
		fs.Key = ""
		j.Shards[key] = &fs
	}
	return j, nil
}

// save rewrites the whole journal atomically (at the start of a run, after verification).
func (j *journal) save(dir string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(journalHead{PlanID: j.PlanID}); err != nil {
		return err
	}
	keys := make([]string, 0, len(j.Shards))
	for k := range j.Shards {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fs := *j.Shards[k]
		fs.Key = k
		if err := enc.Encode(&fs); err != nil {
			return err
		}
	}
	return writeFileAtomic(filepath.Join(dir, JournalName), buf.Bytes())
}

// add records a finished shard: in memory, and as one appended, synced line on disk.
func (j *journal) add(dir, key string, fs *finishedShard) error {
	j.Shards[key] = fs
	line := *fs
	line.Key = key
	b, err := json.Marshal(&line)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, JournalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("convert: journal: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: journal: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary name, syncs it and renames it over path.
func writeFileAtomic(path string, data []byte) error {
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeAtomic writes a file through fill under a temporary name (".NAME.partial"), syncs it and
// renames it to path; on any error the temporary file is removed and path is untouched.
func writeAtomic(path string, fill func(io.Writer) error) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("convert: write %s: %w", path, err)
	}
	return nil
}

// hashFile returns the size and SHA-256 of a file.
func hashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("convert: hash %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// shardSet manages the writers of one output: opened on first write, closed when the last of
// their tensors is complete, journaled when closed.
type shardSet struct {
	out       *Output
	dir       string // the output directory (DIR/decode)
	mu        sync.Mutex
	writers   []*safetensors.Writer
	remaining []int  // tensors not yet complete, per shard
	done      []bool // finished (this run or an earlier one)
}

func newShardSet(out *Output, dir string, j *journal) *shardSet {
	s := &shardSet{out: out, dir: dir, writers: make([]*safetensors.Writer, len(out.Shards)),
		remaining: make([]int, len(out.Shards)), done: make([]bool, len(out.Shards))}
	for i, sh := range out.Shards {
		s.remaining[i] = len(sh.Specs)
		if _, ok := j.Shards[s.key(i)]; ok {
			s.done[i] = true
		}
	}
	return s
}

// key is the journal key of shard i.
func (s *shardSet) key(i int) string { return s.out.Kind + "/" + s.out.Shards[i].FileName }

// finished reports whether the shard holding tensor name is already complete.
func (s *shardSet) finished(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[s.out.Where[name]]
}

// write puts data at offset off of tensor name, opening the shard's writer if needed. Writes to
// shards finished by an earlier run are dropped: their bytes are already on disk.
func (s *shardSet) write(name string, off int64, data []byte) error {
	i, ok := s.out.Where[name]
	if !ok {
		return fmt.Errorf("convert: internal: tensor %q not planned in %s", name, s.out.Kind)
	}
	s.mu.Lock()
	if s.done[i] {
		s.mu.Unlock()
		return nil
	}
	w := s.writers[i]
	if w == nil {
		var err error
		w, err = safetensors.Create(filepath.Join(s.dir, s.out.Shards[i].FileName), s.out.Shards[i].Layout)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.writers[i] = w
	}
	s.mu.Unlock()
	return w.WriteTensorAt(name, off, data)
}

// complete marks tensor name fully written. It returns the index of a shard that this completes
// (its writer is closed), or -1.
func (s *shardSet) complete(name string) (int, error) {
	i := s.out.Where[name]
	s.mu.Lock()
	s.remaining[i]--
	if s.remaining[i] > 0 || s.done[i] {
		s.mu.Unlock()
		return -1, nil
	}
	w := s.writers[i]
	s.writers[i] = nil
	s.done[i] = true
	s.mu.Unlock()
	if w == nil { // a shard whose tensors are all empty
		var err error
		if w, err = safetensors.Create(filepath.Join(s.dir, s.out.Shards[i].FileName), s.out.Shards[i].Layout); err != nil {
			return -1, err
		}
	}
	if err := w.Close(); err != nil {
		return -1, err
	}
	return i, nil
}

// abort removes the temporary files of unfinished shards.
func (s *shardSet) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.writers {
		if w != nil {
			w.Abort()
			s.writers[i] = nil
		}
	}
}

// allDone reports whether every shard is finished.
func (s *shardSet) allDone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.done {
		if !d {
			return false
		}
	}
	return true
}
