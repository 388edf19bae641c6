package publish

import (
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"pdq/publish/store"
)

// transferCounter wraps a store and records the most transfers (Put, UploadPart, and GetRange
// until its reader is closed) that were in flight at once.
type transferCounter struct {
	store.Store
	mu        sync.Mutex
	now, most int
	total     int
}

func (c *transferCounter) enter() {
	c.mu.Lock()
	c.now++
	c.total++
	c.most = max(c.most, c.now)
	c.mu.Unlock()
}

func (c *transferCounter) leave() {
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

func (c *transferCounter) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts store.PutOptions) error {
	c.enter()
	defer c.leave()
	return c.Store.Put(ctx, key, r, size, opts)
}

func (c *transferCounter) UploadPart(ctx context.Context, key, id string, num int32, r io.ReadSeeker, size int64, crc uint32) (store.Part, error) {
	c.enter()
	defer c.leave()
	return c.Store.UploadPart(ctx, key, id, num, r, size, crc)
}

func (c *transferCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.enter()
	rc, err := c.Store.GetRange(ctx, key, off, n)
	if err != nil {
		c.leave()
		return nil, err
	}
	return &leaveOnClose{ReadCloser: rc, leave: c.leave}, nil
}

type leaveOnClose struct {
	io.ReadCloser
	once  sync.Once
	leave func()
}

func (l *leaveOnClose) Close() error {
	err := l.ReadCloser.Close()
	l.once.Do(l.leave)
	return err
}

// TestParallelBoundsTransfers: publish and pull of files of several parts each, several files at
// once, never have more than Parallel transfers in flight, across files (store.Limit's own
// tests prove the bound deterministically; this checks that publish and pull go through it).
func TestParallelBoundsTransfers(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 4) // two files of 3 and 5 parts
	for _, parallel := range []int{1, 2} {
		c := &transferCounter{Store: localStore(t, filepath.Join(t.TempDir(), "v1"))}
		opts := quiet()
		opts.Parallel = parallel
		if _, err := Publish(context.Background(), c, src, opts); err != nil {
			t.Fatal(err)
		}
		_, err := Pull(context.Background(), c, t.TempDir(), PullOptions{PartSize: store.MinPartSize, Parallel: parallel, Log: discardLog})
		if err != nil {
			t.Fatal(err)
		}
		if c.most > parallel || c.total < 10 {
			t.Fatalf("parallel %d: %d transfers, at most %d at once", parallel, c.total, c.most)
		}
	}
}
