package convert

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"pdq/internal/fsutil"
	"pdq/safetensors"
)

// shardSet manages the writers of one output: opened on first write, closed when the last of
// their tensors is complete, journaled when closed. A shard an interrupted run left unfinished
// is resumed: the tensors the journal lists for it whose bytes in its temporary file still have
// the recorded CRC-32C are kept, the rest rewritten.
type shardSet struct {
	out       *Output
	dir       string // the output directory (DIR/decode)
	mu        sync.Mutex
	writers   []*safetensors.Writer
	opening   []chan struct{} // per shard: closed when the writer a worker is creating is there
	remaining []int           // tensors not yet complete, per shard
	done      []bool          // finished (this run or an earlier one)
	kept      map[string]bool // tensors of unfinished shards kept from an earlier run
}

// newShardSet starts the writers of out in dir. Shards in journal j are finished; with own not
// nil, so are the shards whose keys it lacks (another part writes them): writes to either are
// dropped. Tensors j lists for an unfinished shard are checked and kept (the shard's writer is
// then resumed); entries that fail the check are removed from j.
func newShardSet(out *Output, dir string, j *journal, own map[string]bool) *shardSet {
	s := &shardSet{out: out, dir: dir, writers: make([]*safetensors.Writer, len(out.Shards)), opening: make([]chan struct{}, len(out.Shards)),
		remaining: make([]int, len(out.Shards)), done: make([]bool, len(out.Shards)), kept: map[string]bool{}}
	for i, sh := range out.Shards {
		s.remaining[i] = len(sh.Specs)
		if _, ok := j.Shards[s.key(i)]; ok || own != nil && !own[s.key(i)] {
			s.done[i] = true
			continue
		}
		s.resume(i, j)
	}
	return s
}

// resume keeps the journaled tensors of unfinished shard i that check out, with its writer.
func (s *shardSet) resume(i int, j *journal) {
	key := s.key(i)
	kept := map[string]uint32{}
	for _, spec := range s.out.Shards[i].Specs {
		tk := tensorKey{key, spec.Name}
		if fs := j.Tensors[tk]; fs != nil {
			if crc, err := s.tensorCRC(i, spec.Name); err == nil && fs.CRC32C != nil && crc == *fs.CRC32C {
				kept[spec.Name] = crc
				continue
			}
			delete(j.Tensors, tk)
		}
	}
	if len(kept) == 0 {
		return
	}
	w, err := safetensors.Resume(filepath.Join(s.dir, s.out.Shards[i].FileName), s.out.Shards[i].Layout, kept)
	if err != nil {
		slog.Warn("unfinished shard cannot be resumed; redoing it", "shard", key, "err", err)
		for name := range kept {
			delete(j.Tensors, tensorKey{key, name})
		}
		return
	}
	s.writers[i] = w
	s.remaining[i] -= len(kept)
	for name := range kept {
		s.kept[name] = true
	}
}

// tensorCRC is the CRC-32C of tensor name's bytes in the temporary file of shard i (read back:
// a resumed run checks the tensors an interrupted one journaled).
func (s *shardSet) tensorCRC(i int, name string) (uint32, error) {
	l := s.out.Shards[i].Layout
	f, err := os.Open(fsutil.PartialName(filepath.Join(s.dir, s.out.Shards[i].FileName)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for k := range l.Tensors {
		if t := &l.Tensors[k]; t.Name == name {
			h := fsutil.CRC32C()
			if _, err := io.Copy(h, io.NewSectionReader(f, l.DataStart()+t.DataOffsets[0], t.ByteSize())); err != nil {
				return 0, err
			}
			return h.Sum32(), nil
		}
	}
	return 0, fmt.Errorf("convert: internal: tensor %q not in %s", name, s.key(i))
}

// key is the journal key of shard i.
func (s *shardSet) key(i int) string { return string(s.out.Kind) + "/" + s.out.Shards[i].FileName }

// finished reports whether tensor name needs no writing: its shard is complete (or another
// part's), or it was kept from an earlier run.
func (s *shardSet) finished(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[s.out.Where[name]] || s.kept[name]
}

// write puts data at offset off of tensor name, opening the shard's writer if needed. Writes to
// shards finished by an earlier run, and to tensors kept from one, are dropped: their bytes are
// already on disk.
func (s *shardSet) write(name string, off int64, data []byte) error {
	i, ok := s.out.Where[name]
	if !ok {
		return fmt.Errorf("convert: internal: tensor %q not planned in %s", name, s.out.Kind)
	}
	s.mu.Lock()
	if s.done[i] || s.kept[name] {
		s.mu.Unlock()
		return nil
	}
	w := s.writers[i]
	for w == nil {
		if ch := s.opening[i]; ch != nil { // another worker is creating it
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
			if w = s.writers[i]; w == nil {
				s.mu.Unlock()
				return fmt.Errorf("convert: %s could not be created", s.key(i))
			}
			break
		}
		// Created outside the lock: Create preallocates the whole shard, which takes a while
		// on some file systems (tmpfs zeroes it), and writes to the other shards go on.
		ch := make(chan struct{})
		s.opening[i] = ch
		s.mu.Unlock()
		nw, err := safetensors.Create(filepath.Join(s.dir, s.out.Shards[i].FileName), s.out.Shards[i].Layout)
		s.mu.Lock()
		s.opening[i] = nil
		s.writers[i] = nw // nil on error
		close(ch)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		w = nw
	}
	s.mu.Unlock()
	return w.WriteTensorAt(name, off, data)
}

// complete marks tensor name fully written. It returns the index of a shard that this completes
// (its writer closed) with the CRC-32C of the shard's file, or -1; for a tensor written by this
// run into a shard still open, the CRC-32C of its bytes (it then deserves a journal line of its
// own). Both checksums are the writer's, taken from the bytes as they were written.
func (s *shardSet) complete(name string) (closed int, shardCRC uint32, tensorCRC *uint32, err error) {
	i := s.out.Where[name]
	s.mu.Lock()
	if s.done[i] || s.kept[name] {
		s.mu.Unlock()
		return -1, 0, nil, nil
	}
	s.remaining[i]--
	if s.remaining[i] > 0 {
		w := s.writers[i]
		s.mu.Unlock()
		var sum uint32 // a tensor without bytes: no writer needed, checksum 0
		if w != nil {
			var ok bool
			if sum, ok = w.TensorCRC32C(name); !ok {
				return -1, 0, nil, fmt.Errorf("convert: internal: tensor %q of %s complete but not fully written", name, s.key(i))
			}
		}
		return -1, 0, &sum, nil
	}
	s.mu.Unlock()
	shardCRC, err = s.close(i)
	if err != nil {
		return -1, 0, nil, err
	}
	return i, shardCRC, nil, nil
}

// close finishes shard i, whose tensors are all written, and returns its file's CRC-32C.
func (s *shardSet) close(i int) (uint32, error) {
	s.mu.Lock()
	w := s.writers[i]
	s.writers[i] = nil
	s.done[i] = true
	s.mu.Unlock()
	if w == nil { // a shard whose tensors are all empty
		var err error
		if w, err = safetensors.Create(filepath.Join(s.dir, s.out.Shards[i].FileName), s.out.Shards[i].Layout); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return w.CRC32C(), nil
}

// ready returns the unfinished shards whose every tensor was kept from an earlier run: the run
// that left them stopped just before closing them.
func (s *shardSet) ready() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r []int
	for i := range s.remaining {
		if !s.done[i] && s.remaining[i] == 0 && s.writers[i] != nil {
			r = append(r, i)
		}
	}
	return r
}

// abort stops the writers of unfinished shards. With keep (an interrupted run) their temporary
// files stay for a resumed run to continue; otherwise they are removed.
func (s *shardSet) abort(keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.writers {
		if w != nil {
			if keep {
				w.Detach()
			} else {
				w.Abort()
			}
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
