package publish

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"pdq/publish/store"
)

// readCounter counts the bytes read of each local file through openSource.
type readCounter struct {
	mu   sync.Mutex
	read map[string]int64
}

type countedSource struct {
	localSource
	c *readCounter
}

func (s countedSource) count(n int) {
	s.c.mu.Lock()
	s.c.read[s.Name()] += int64(n)
	s.c.mu.Unlock()
}

func (s countedSource) Read(b []byte) (int, error) {
	n, err := s.localSource.Read(b)
	s.count(n)
	return n, err
}

func (s countedSource) ReadAt(b []byte, off int64) (int, error) {
	n, err := s.localSource.ReadAt(b, off)
	s.count(n)
	return n, err
}

// countReads makes every read of a local file by publish counted until the test ends.
func countReads(t *testing.T) *readCounter {
	c := &readCounter{read: map[string]int64{}}
	orig := openSource
	openSource = func(name string) (localSource, error) {
		f, err := orig(name)
		if err != nil {
			return nil, err
		}
		return countedSource{f, c}, nil
	}
	t.Cleanup(func() { openSource = orig })
	return c
}

// take returns the counts so far and starts again from zero.
func (c *readCounter) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.read
	c.read = map[string]int64{}
	return m
}

// readOnce fails unless every file of dir was read exactly times its size (and nothing else
// was read), and the result, when there is one, says so too.
func readOnce(t *testing.T, what, dir string, got map[string]int64, res *Result, times int64) {
	t.Helper()
	files, err := listFiles(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		if got[f.local] != times*f.size {
			t.Errorf("%s: %s (%d bytes) was read for %d bytes, want %d", what, f.path, f.size, got[f.local], times*f.size)
		}
		delete(got, f.local)
		total += f.size
	}
	for name, n := range got {
		t.Errorf("%s: %s read for %d bytes besides", what, name, n)
	}
	if res != nil && res.BytesRead != times*total {
		t.Errorf("%s: summary says %d bytes read, want %d", what, res.BytesRead, times*total)
	}
}

// A first publish reads each file once (hashed while sent, not before), with or without a sums
// record; a publish of the same files to another version, vouched for by the record, reads each
// once too (to send it) and hashes nothing; its rerun after a failure just before the manifest
// reads nothing. On the local store and on S3.
func TestPublishReadsEachFileOnce(t *testing.T) {
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			newStore := func(name string) store.Store { return localStore(t, filepath.Join(t.TempDir(), name)) }
			if kind == "s3" {
				e := newS3(t)
				newStore = func(name string) store.Store { return e.srv.Store(t, "models/once/"+name) }
			}
			src := t.TempDir()
			writeCheckpoint(t, src, 2) // files of one part and of several
			c := countReads(t)
			total := dirSize(t, src)

			res := roundTrip(t, newStore("plain"), src, quiet())
			readOnce(t, "first publish", src, c.take(), res, 1)
			if res.BytesHashed != total {
				t.Errorf("first publish hashed %d bytes of %d", res.BytesHashed, total)
			}

			opts := quiet()
			opts.SumsRecord = filepath.Join(t.TempDir(), "sums.json")
			res = roundTrip(t, newStore("recorded-first"), src, opts)
			readOnce(t, "first publish with a record", src, c.take(), res, 1)

			dst := newStore("again")
			failing := &hookStore{Store: dst, failPut: map[string]int{ManifestKey: 1}}
			if _, err := Publish(context.Background(), failing, src, opts); !errors.Is(err, errInjected) {
				t.Fatalf("publish: %v, want the injected failure", err)
			}
			readOnce(t, "publish of recorded files", src, c.take(), nil, 1)
			res = roundTrip(t, dst, src, opts)
			readOnce(t, "its rerun", src, c.take(), res, 0)
			if res.BytesHashed != 0 {
				t.Errorf("the rerun hashed %d bytes", res.BytesHashed)
			}
		})
	}
}

// A file rewritten while its parts are being sent (same size, other bytes) fails the publish
// with errChanged and nothing is published; the rerun publishes the file as it is now, in
// another folder (the file's identity changed), and it pulls back byte for byte.
func TestPublishFileChangedWhileSent(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 2)
	name := "model-00001-of-00002.safetensors"
	p := filepath.Join(src, name)
	st := localStore(t, t.TempDir())
	opts := quiet()
	opts.Parallel = 1
	var once sync.Once
	opts.OnPart = func(key string, part int32) {
		if strings.HasSuffix(key, "/"+name) {
			once.Do(func() {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Error(err)
				}
				b[len(b)-1] ^= 0xff
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Error(err)
				}
			})
		}
	}
	before := keyIn(t, src, name, false)
	if _, err := Publish(context.Background(), st, src, opts); !errors.Is(err, errChanged) {
		t.Fatalf("publish of a file rewritten while sent: %v, want errChanged", err)
	}
	if _, err := st.Stat(context.Background(), ManifestKey); !errors.Is(err, store.ErrNotExist) {
		t.Fatalf("a manifest was written: %v", err)
	}
	if after := keyIn(t, src, name, false); after == before {
		t.Fatalf("the rewritten file keeps its key %s", after)
	}
	roundTrip(t, st, src, quiet())
}

// An object sent in parts carries no sha256 metadata (its upload began before the file was
// hashed); the quick check still sees it replaced by another client (no metadata) or truncated.
func TestQuickVerifyMultipartObject(t *testing.T) {
	src := t.TempDir()
	writeCheckpoint(t, src, 2)
	name := "model-00001-of-00002.safetensors"
	ctx := context.Background()
	for _, damage := range []string{"replaced", "truncated"} {
		st := localStore(t, t.TempDir())
		res, err := Publish(ctx, st, src, quiet())
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Files[slices.IndexFunc(res.Files, func(r FileResult) bool { return r.Path == name })]; r.PartsSent < 2 {
			t.Fatalf("%s went up in %d parts", name, r.PartsSent)
		}
		if v, err := Verify(ctx, st, VerifyOptions{}); err != nil || !v.OK {
			t.Fatalf("quick verify of a fresh version: %+v, %v", v, err)
		}
		key := keyIn(t, src, name, false)
		info, err := st.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		md := info.Metadata
		if damage == "replaced" {
			b[0] ^= 1
			md = nil
		} else {
			b = b[:len(b)-1]
		}
		if err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b)), store.PutOptions{Metadata: md}); err != nil {
			t.Fatal(err)
		}
		v, err := Verify(ctx, st, VerifyOptions{})
		if !errors.Is(err, ErrVerify) || v.Files[indexOf(v, name)].OK {
			t.Fatalf("%s: quick verify = %+v, %v", damage, v, err)
		}
	}
}
