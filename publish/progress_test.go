package publish

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"pdq/publish/store"
)

// countProgress records the progress reported, and how much was done before the first byte was
// sent.
type countProgress struct {
	total, done, beforeSend atomic.Int64
	sending                 atomic.Bool
}

func (c *countProgress) AddTotal(n int64) { c.total.Add(n) }
func (c *countProgress) Add(n int64) {
	c.done.Add(n)
	if !c.sending.Load() {
		c.beforeSend.Add(n)
	}
}

// sendWatch tells a countProgress when the first compressed object is written.
type sendWatch struct {
	store.Store
	p *countProgress
}

func (s sendWatch) Put(ctx context.Context, key string, r io.ReadSeeker, size int64, opts store.PutOptions) error {
	if strings.HasSuffix(key, zipnnSuffix) {
		s.p.sending.Store(true)
	}
	return s.Store.Put(ctx, key, r, size, opts)
}

func (s sendWatch) CreateMultipart(ctx context.Context, key string, opts store.PutOptions) (string, error) {
	if strings.HasSuffix(key, zipnnSuffix) {
		s.p.sending.Store(true)
	}
	return s.Store.CreateMultipart(ctx, key, opts)
}

// With --compress the hashing and compressing passes count in the progress (the bar moves from
// the start, not only once the upload begins), and so does restoring in a pull; both end with
// everything counted done.
func TestProgressCountsCompression(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 1)
	files, err := listFiles(src, "")
	if err != nil {
		t.Fatal(err)
	}
	var packable int64
	for _, f := range files {
		if compressible(f.path) {
			packable += f.size
		}
	}
	st := localStore(t, filepath.Join(t.TempDir(), "v1"))
	var pp countProgress
	opts := quiet()
	opts.Compress = true
	opts.Progress = &pp
	opts.Parallel = 1
	if _, err := Publish(context.Background(), sendWatch{st, &pp}, src, opts); err != nil {
		t.Fatal(err)
	}
	if pp.beforeSend.Load() < packable {
		t.Errorf("publish --compress reported %d bytes done before sending, want at least the %d bytes hashed and compressed", pp.beforeSend.Load(), packable)
	}
	if pp.done.Load() != pp.total.Load() {
		t.Errorf("publish ended at %d of %d", pp.done.Load(), pp.total.Load())
	}
	var lp countProgress
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Pull(context.Background(), st, out, PullOptions{Progress: &lp, Log: discardLog}); err != nil {
		t.Fatal(err)
	}
	m, _, err := ReadManifest(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, f := range m.Files {
		want += f.StoredSize
		if f.Compression == CompressionZipNN {
			want += f.Size
		}
	}
	if lp.total.Load() != want || lp.done.Load() != want {
		t.Errorf("pull reported %d of %d, want the %d bytes downloaded and restored", lp.done.Load(), lp.total.Load(), want)
	}
	// Pulled again, every file is checked where it is: that reading counts too.
	var again countProgress
	if _, err := Pull(context.Background(), st, out, PullOptions{Progress: &again, Log: discardLog}); err != nil {
		t.Fatal(err)
	}
	var check int64
	for _, f := range m.Files {
		check += f.StoredSize + f.Size
	}
	if again.total.Load() != check || again.done.Load() != check {
		t.Errorf("pull of present files reported %d of %d, want %d (the files read to check them)", again.done.Load(), again.total.Load(), check)
	}
}
