package safetensors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"pdq/internal/fsutil"
)

// ReadTensor reads the whole of t into dst, whose length must be t.ByteSize().
func (c *Checkpoint) ReadTensor(t *Tensor, dst []byte) error {
	if int64(len(dst)) != t.ByteSize() {
		return fmt.Errorf("safetensors: %s: tensor %q: %w: buffer of %d bytes for %d",
			t.Shard.Path, t.Name, ErrOutOfRange, len(dst), t.ByteSize())
	}
	return c.ReadTensorAt(t, dst, 0)
}

// ReadTensorAt reads len(dst) bytes of t starting off bytes into the tensor. The range must lie
// inside the tensor.
func (c *Checkpoint) ReadTensorAt(t *Tensor, dst []byte, off int64) error {
	n := int64(len(dst))
	if off < 0 || n > t.ByteSize() || off > t.ByteSize()-n {
		return fmt.Errorf("safetensors: %s: tensor %q: %w: bytes [%d, %d) of %d",
			t.Shard.Path, t.Name, ErrOutOfRange, off, off+n, t.ByteSize())
	}
	f, err := c.file(t.Shard, t.Name)
	if err != nil {
		return err
	}
	if err := readFull(f, dst, t.Offset()+off); err != nil {
		return fmt.Errorf("safetensors: %s: tensor %q: %w", t.Shard.Path, t.Name, err)
	}
	c.read.Add(n)
	return nil
}

// ReadShardAt reads len(dst) bytes of shard s's file at offset off, the header included: what
// a byte-for-byte copy of the shard needs besides the tensors it reads. The range must lie
// inside the file.
func (c *Checkpoint) ReadShardAt(s *Shard, dst []byte, off int64) error {
	n := int64(len(dst))
	if off < 0 || n > s.Size || off > s.Size-n {
		return fmt.Errorf("safetensors: %s: %w: bytes [%d, %d) of %d", s.Path, ErrOutOfRange, off, off+n, s.Size)
	}
	f, err := c.file(s, "")
	if err != nil {
		return err
	}
	if err := readFull(f, dst, off); err != nil {
		return fmt.Errorf("safetensors: %s: %w", s.Path, err)
	}
	c.read.Add(n)
	return nil
}

// BytesRead returns the bytes ReadTensorAt and ReadShardAt have read from the shard files (what
// Open reads of the headers, and TensorReader's readers, are not counted).
func (c *Checkpoint) BytesRead() int64 { return c.read.Load() }

// TensorReader returns a reader over the bytes of t, for tensors too large to read at once. It
// stays valid until the checkpoint is closed.
func (c *Checkpoint) TensorReader(t *Tensor) (*io.SectionReader, error) {
	f, err := c.file(t.Shard, t.Name)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(f, t.Offset(), t.ByteSize()), nil
}

// ShardFile returns the open file of shard s, the one reads go through (opened on first use and
// checked like them); it stays the checkpoint's, closed by Close.
func (c *Checkpoint) ShardFile(s *Shard) (*os.File, error) { return c.file(s, "") }

// file returns the open file of shard s, opening it on first use, for a read of tensor name ("":
// of the file's bytes). A file whose size or modification time differs from what Open saw is
// refused with ErrShardChanged.
func (c *Checkpoint) file(s *Shard, name string) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	what := s.Path
	if name != "" {
		what = fmt.Sprintf("%s: tensor %q", s.Path, name)
	}
	if c.closed {
		return nil, fmt.Errorf("safetensors: %s: %w", what, ErrClosed)
	}
	if f := c.files[s]; f != nil {
		return f, nil
	}
	if !slices.Contains(c.Shards, s) {
		return nil, fmt.Errorf("safetensors: %s: shard is not part of this checkpoint", what)
	}
	f, err := fsutil.OpenRegular(s.Path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err == nil && (st.Size() != s.Size || !st.ModTime().Equal(s.ModTime)) {
		err = fmt.Errorf("%s: %w: size %d, modified %v; was %d, %v", s.Path, ErrShardChanged,
			st.Size(), st.ModTime(), s.Size, s.ModTime)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	c.files[s] = f
	return f, nil
}

// Close closes the shard files opened by reads. Reads must not be in progress; later reads fail
// with ErrClosed.
func (c *Checkpoint) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	c.files = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
