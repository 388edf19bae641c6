package safetensors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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
	f, err := c.file(t)
	if err != nil {
		return err
	}
	if err := readFull(f, dst, t.Offset()+off); err != nil {
		return fmt.Errorf("safetensors: %s: tensor %q: %w", t.Shard.Path, t.Name, err)
	}
	return nil
}

// TensorReader returns a reader over the bytes of t, for tensors too large to read at once. It
// stays valid until the checkpoint is closed.
func (c *Checkpoint) TensorReader(t *Tensor) (*io.SectionReader, error) {
	f, err := c.file(t)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(f, t.Offset(), t.ByteSize()), nil
}

// file returns the open file of t's shard, opening it on first use. A file whose size or
// modification time differs from what Open saw is refused with ErrShardChanged.
func (c *Checkpoint) file(t *Tensor) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", t.Shard.Path, t.Name, ErrClosed)
	}
	if f := c.files[t.Shard]; f != nil {
		return f, nil
	}
	s := t.Shard
	if !slices.Contains(c.Shards, s) {
		return nil, fmt.Errorf("safetensors: tensor %q: shard %s is not part of this checkpoint", t.Name, s.Path)
	}
	f, err := OpenRegular(s.Path)
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
