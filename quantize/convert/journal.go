package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"pdq/quantize"
	"pdq/quantize/report"
)

// JournalName is the file in the output directory that records finished shards, so that a rerun
// resumes where an interrupted one stopped.
const JournalName = ".pdq-journal.json"

// record is a finished report row with the sums that rebuild the summary on resume.
type record struct {
	Row report.TensorReport `json:"row"`
	M   quantize.Metrics    `json:"m"`
	RTN *quantize.Metrics   `json:"rtn,omitempty"`
}

// finishedShard is one journal entry: a finished shard of the size and CRC-32C given, or (Tensor
// set) one finished tensor of a shard still being written, whose bytes in the shard's temporary
// file have the CRC-32C. SHA256 is read from journals of earlier versions only.
type finishedShard struct {
	Key     string   `json:"key,omitempty"` // set in the file, the map key in memory
	Tensor  string   `json:"tensor,omitempty"`
	Size    int64    `json:"size"`
	SHA256  string   `json:"sha256,omitempty"`
	CRC32C  *uint32  `json:"crc32c,omitempty"`
	Records []record `json:"records,omitempty"`
}

// tensorKey names one tensor of one output shard (journal key, tensor name).
type tensorKey struct{ shard, tensor string }

// journal lists finished shards by output-relative path ("decode/model-00001-of-00009.safetensors").
// On disk it is JSON lines: a first line with the plan ID, then one line per finished shard,
// appended and synced as each shard completes, so recording a shard costs its own line only. A
// line torn by a crash ends the journal: the shards after it are redone.
type journal struct {
	name   string // the file name in the output directory: JournalName, or a part's
	PlanID string
	Facts  map[string]string // what the plan ID was made of (planFacts), to say what differs
	Shards map[string]*finishedShard
	// Tensors are the finished tensors of unfinished shards: an interrupted run keeps them in
	// the shard's temporary file, so a resumed one redoes less than a shard.
	Tensors map[tensorKey]*finishedShard

	f *os.File // the journal file open for appending (thousands of lines per run), or nil
}

// journalHead is the first line of the journal file.
type journalHead struct {
	PlanID string            `json:"plan_id"`
	Facts  map[string]string `json:"plan,omitempty"`
}

// newJournal is an empty journal kept in the file name.
func newJournal(name string) *journal {
	return &journal{name: name, Shards: map[string]*finishedShard{}, Tensors: map[tensorKey]*finishedShard{}}
}

// loadJournal reads the journal file name in dir; a missing file is an empty journal.
func loadJournal(dir, name string) (*journal, error) {
	j := newJournal(name)
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	lines := bytes.Split(b, []byte("\n"))
	var head journalHead
	if err := json.Unmarshal(lines[0], &head); err != nil {
		return nil, fmt.Errorf("convert: %s: %w: %v", filepath.Join(dir, name), ErrBadJournal, err)
	}
	j.PlanID, j.Facts = head.PlanID, head.Facts
	for _, line := range lines[1:] {
		var fs finishedShard
		if len(line) == 0 || json.Unmarshal(line, &fs) != nil || fs.Key == "" {
			break // the end, or a line torn by a crash
		}
		key := fs.Key
		fs.Key = ""
		if fs.Tensor != "" {
			j.Tensors[tensorKey{key, fs.Tensor}] = &fs
			continue
		}
		j.Shards[key] = &fs
	}
	for k := range j.Tensors {
		if j.Shards[k.shard] != nil {
			delete(j.Tensors, k) // the shard finished since
		}
	}
	return j, nil
}

// save rewrites the whole journal atomically (at the start of a run, after verification).
func (j *journal) save(dir string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(journalHead{PlanID: j.PlanID, Facts: j.Facts}); err != nil {
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
	tks := make([]tensorKey, 0, len(j.Tensors))
	for k := range j.Tensors {
		if j.Shards[k.shard] == nil {
			tks = append(tks, k)
		}
	}
	sort.Slice(tks, func(a, b int) bool {
		return tks[a].shard < tks[b].shard || tks[a].shard == tks[b].shard && tks[a].tensor < tks[b].tensor
	})
	for _, k := range tks {
		fs := *j.Tensors[k]
		fs.Key, fs.Tensor = k.shard, k.tensor
		if err := enc.Encode(&fs); err != nil {
			return err
		}
	}
	j.close() // the file is replaced: later lines go to the new one
	return writeFileAtomic(filepath.Join(dir, j.name), buf.Bytes())
}

// close closes the journal file if appendLine opened it.
func (j *journal) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// add records a finished shard: in memory, and as one appended, synced line on disk.
func (j *journal) add(dir, key string, fs *finishedShard) error {
	j.Shards[key] = fs
	return j.appendLine(dir, key, fs, true)
}

// addTensor records a finished tensor of the unfinished shard key: in memory, and as one
// appended line, not synced (a line lost in a crash only means the tensor is redone; a line whose
// data did not reach the disk fails its CRC on resume).
func (j *journal) addTensor(dir, key, tensor string, fs *finishedShard) error {
	j.Tensors[tensorKey{key, tensor}] = fs
	line := *fs
	line.Tensor = tensor
	return j.appendLine(dir, key, &line, false)
}

func (j *journal) appendLine(dir, key string, fs *finishedShard, sync bool) error {
	line := *fs
	line.Key = key
	b, err := json.Marshal(&line)
	if err != nil {
		return err
	}
	if j.f == nil {
		if j.f, err = os.OpenFile(filepath.Join(dir, j.name), os.O_WRONLY|os.O_APPEND, 0); err != nil {
			return fmt.Errorf("convert: journal: %w", err)
		}
	}
	_, err = j.f.Write(append(b, '\n')) // one write per line, appended: a crash tears the last line only
	if err == nil && sync {
		err = j.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("convert: journal: %w", err)
	}
	return nil
}

// verifyJournal drops journal entries whose file is missing or differs from what was recorded;
// it stops between files when ctx is cancelled.
func verifyJournal(ctx context.Context, dir string, j *journal) error {
	keys := make([]string, 0, len(j.Shards))
	for k := range j.Shards {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		fs := j.Shards[k]
		// Shards are checked by CRC-32C (a journal of an earlier version, with SHA-256 only,
		// has its shards redone).
		size, sum, err := crcFile(ctx, filepath.Join(dir, filepath.FromSlash(k)))
		if err != nil || size != fs.Size || fs.CRC32C == nil || sum != *fs.CRC32C {
			slog.Warn("finished shard missing or changed; redoing it", "shard", k)
			delete(j.Shards, k)
		}
	}
	return nil
}
