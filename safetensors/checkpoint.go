package safetensors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pdq/internal/fsutil"
	"pdq/internal/par"
)

// Shard is one safetensors file of a checkpoint, with its parsed header.
type Shard struct {
	Name    string // base name
	Path    string
	Size    int64
	ModTime time.Time
	Changed time.Time // status-change time (fsutil.ChangeTime) when Open read the header; zero where unknown
	Header  *Header
}

// Tensor is a lazy handle on a tensor of a checkpoint: where it is, not its data.
type Tensor struct {
	TensorInfo
	Shard *Shard
}

// Offset returns the absolute offset of the tensor's first byte in its shard file.
func (t *Tensor) Offset() int64 { return t.Shard.Header.DataStart + t.DataOffsets[0] }

// Checkpoint is an opened safetensors checkpoint: one file or a directory of shards. Only headers
// are read by Open; tensor data is read on demand with positioned reads, which are safe from
// several goroutines at once.
type Checkpoint struct {
	Dir           string   // the directory of the shards (and of config.json and side files)
	Opened        string   // the path Open was given: Dir, the index file or the one shard
	Shards        []*Shard // sorted by name
	IndexPath     string   // "" when the checkpoint has no index file
	IndexMetadata map[string]any

	tensors   []*Tensor
	byName    map[string]*Tensor
	dataBytes int64

	mu     sync.Mutex
	files  map[*Shard]*os.File // opened on first read
	closed bool
	read   atomic.Int64 // bytes read by ReadTensorAt and ReadShardAt
}

// Open opens a checkpoint at path, which is either a directory holding IndexFileName (the shards
// are the files its weight_map names), a directory of *.safetensors files, a single .safetensors
// file, or the index file itself. Every header is parsed and validated (see ParseHeader) and the
// shards checked against the index: a shard name that is not a plain file name in the directory, a
// missing shard, a tensor the index places in a shard that lacks it, a tensor in a shard the index
// does not place there, and a tensor in two shards are all errors. Shards not named by the index
// are ignored. Errors name the file and tensor concerned.
func Open(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	c := &Checkpoint{Opened: path, files: map[*Shard]*os.File{}}
	var names []string
	var ix *index
	switch {
	case st.IsDir():
		c.Dir = path
		ixPath := filepath.Join(path, IndexFileName)
		if _, err := os.Stat(ixPath); err == nil {
			c.IndexPath = ixPath
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
	case filepath.Base(path) == IndexFileName:
		c.Dir, c.IndexPath = filepath.Dir(path), path
	default:
		c.Dir, names = filepath.Dir(path), []string{filepath.Base(path)}
	}
	switch {
	case c.IndexPath != "":
		if ix, err = readIndex(c.IndexPath); err != nil {
			return nil, err
		}
		c.IndexMetadata, names = ix.metadata, ix.shards
		for _, name := range names {
			p := filepath.Join(c.Dir, name)
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("safetensors: %s: tensor %q: %w: %s", c.IndexPath, ix.first[name], ErrMissingShard, p)
			}
		}
	case names == nil:
		if names, err = listShards(c.Dir); err != nil {
			return nil, err
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("safetensors: %s: %w", path, ErrNoTensors)
	}
	if c.Shards, err = openShards(c.Dir, names); err != nil {
		return nil, err
	}
	if err := c.indexTensors(ix); err != nil {
		return nil, err
	}
	return c, nil
}

// listShards returns the sorted names of the regular *.safetensors files in dir (symbolic links
// to regular files included).
func listShards(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
		if st.Mode().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// openShards parses the headers of the named files in dir, several at a time. The error reported
// is that of the first failing shard in name order, whatever the timing.
func openShards(dir string, names []string) ([]*Shard, error) {
	shards := make([]*Shard, len(names))
	workers := min(max(4, 2*runtime.GOMAXPROCS(0)), 32) // header reads wait on the disk, not the CPU
	err := par.ForEach(context.Background(), len(names), workers, func(i int) error {
		var err error
		shards[i], err = openShard(filepath.Join(dir, names[i]))
		return err
	})
	if err != nil {
		return nil, err
	}
	return shards, nil
}

// openShard stats a shard and parses its header.
func openShard(path string) (*Shard, error) {
	f, err := fsutil.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %s: %w", path, ErrMissingShard)
	}
	if errors.Is(err, fsutil.ErrNotRegular) {
		return nil, fmt.Errorf("safetensors: %w: %w", err, ErrMissingShard)
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	h, err := parseHeader(f, st.Size(), path)
	if err != nil {
		return nil, err
	}
	return &Shard{Name: filepath.Base(path), Path: path, Size: st.Size(), ModTime: st.ModTime(), Changed: fsutil.ChangeTime(st), Header: h}, nil
}

// indexTensors builds the tensor handles and checks them against the index, if any.
func (c *Checkpoint) indexTensors(ix *index) error {
	n := 0
	for _, s := range c.Shards {
		n += len(s.Header.Tensors)
	}
	c.tensors = make([]*Tensor, 0, n)
	c.byName = make(map[string]*Tensor, n)
	for _, s := range c.Shards {
		handles := make([]Tensor, len(s.Header.Tensors))
		for i := range s.Header.Tensors {
			t := &handles[i]
			*t = Tensor{TensorInfo: s.Header.Tensors[i], Shard: s}
			if prev := c.byName[t.Name]; prev != nil {
				return fmt.Errorf("safetensors: %s: tensor %q: %w: also in %s", s.Path, t.Name, ErrDuplicateTensor, prev.Shard.Path)
			}
			c.byName[t.Name] = t
			c.tensors = append(c.tensors, t)
			c.dataBytes += t.ByteSize()
		}
	}
	if ix == nil {
		return nil
	}
	for _, t := range c.tensors {
		want, ok := ix.weightMap[t.Name]
		if !ok {
			return fmt.Errorf("safetensors: %s: tensor %q: %w: in shard %s but not in the index",
				c.IndexPath, t.Name, ErrIndexMismatch, t.Shard.Name)
		}
		if want != t.Shard.Name {
			return fmt.Errorf("safetensors: %s: tensor %q: %w: index places it in %s, found in %s",
				c.IndexPath, t.Name, ErrIndexMismatch, want, t.Shard.Name)
		}
	}
	if len(ix.weightMap) != len(c.tensors) {
		names := make([]string, 0, len(ix.weightMap))
		for name := range ix.weightMap {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if c.byName[name] == nil {
				return fmt.Errorf("safetensors: %s: tensor %q: %w: index places it in %s, which does not hold it",
					c.IndexPath, name, ErrIndexMismatch, ix.weightMap[name])
			}
		}
	}
	return nil
}

// Tensors returns every tensor: shards in name order, and within a shard in file order.
func (c *Checkpoint) Tensors() []*Tensor { return slices.Clone(c.tensors) }

// Tensor returns the named tensor, or nil.
func (c *Checkpoint) Tensor(name string) *Tensor { return c.byName[name] }

// DataBytes returns the total byte size of all tensors.
func (c *Checkpoint) DataBytes() int64 { return c.dataBytes }
