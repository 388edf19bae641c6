package convert

import (
	"fmt"
	"path/filepath"
	"sync"

	"pdq/safetensors"
)

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

// newShardSet starts the writers of out in dir. Shards in journal j are finished; with own not
// nil, so are the shards whose keys it lacks (another part writes them): writes to either are dropped.
func newShardSet(out *Output, dir string, j *journal, own map[string]bool) *shardSet {
	s := &shardSet{out: out, dir: dir, writers: make([]*safetensors.Writer, len(out.Shards)),
		remaining: make([]int, len(out.Shards)), done: make([]bool, len(out.Shards))}
	for i, sh := range out.Shards {
		s.remaining[i] = len(sh.Specs)
		if _, ok := j.Shards[s.key(i)]; ok || own != nil && !own[s.key(i)] {
			s.done[i] = true
		}
	}
	return s
}

// key is the journal key of shard i.
func (s *shardSet) key(i int) string { return string(s.out.Kind) + "/" + s.out.Shards[i].FileName }

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
