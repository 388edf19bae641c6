package store_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"pdq/publish/store"
)

// gateStore is a fake store that counts the calls in flight by kind and holds each one until
// the test lets it go (a GetRange is in flight until its reader is closed, and its reader
// closes only once let go).
type gateStore struct {
	gate chan struct{} // one receive lets one call finish

	mu                sync.Mutex
	inFlight, maxSeen map[string]int
}

func newGateStore() *gateStore {
	return &gateStore{gate: make(chan struct{}), inFlight: map[string]int{}, maxSeen: map[string]int{}}
}

func (g *gateStore) enter(kind string) {
	g.mu.Lock()
	g.inFlight[kind]++
	g.maxSeen[kind] = max(g.maxSeen[kind], g.inFlight[kind])
	g.mu.Unlock()
}

func (g *gateStore) leave(kind string) {
	g.mu.Lock()
	g.inFlight[kind]--
	g.mu.Unlock()
}

// call is a call in flight until the gate opens once for it.
func (g *gateStore) call(kind string) {
	g.enter(kind)
	<-g.gate
	g.leave(kind)
}

func (g *gateStore) counts(kind string) (now, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight[kind], g.maxSeen[kind]
}

func (g *gateStore) String() string { return "gate://" }
func (g *gateStore) Stat(context.Context, string) (store.Info, error) {
	g.call("meta")
	return store.Info{}, nil
}
func (g *gateStore) Put(context.Context, string, io.ReadSeeker, int64, store.PutOptions) error {
	g.call("transfer")
	return nil
}
func (g *gateStore) GetRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	g.enter("transfer")
	return &gateReader{Reader: strings.NewReader("x"), g: g}, nil
}
func (g *gateStore) List(context.Context, string, func(store.Info) error) error {
	g.call("meta")
	return nil
}
func (g *gateStore) Delete(context.Context, string) error { g.call("meta"); return nil }
func (g *gateStore) CreateMultipart(context.Context, string, store.PutOptions) (string, error) {
	g.call("meta")
	return "id", nil
}
func (g *gateStore) ListUploads(context.Context, string) ([]store.Upload, error) {
	g.call("meta")
	return nil, nil
}
func (g *gateStore) UploadPart(context.Context, string, string, int32, io.ReadSeeker, int64, uint32) (store.Part, error) {
	g.call("transfer")
	return store.Part{}, nil
}
func (g *gateStore) ListParts(context.Context, string, string) ([]store.Part, error) {
	g.call("meta")
	return nil, nil
}
func (g *gateStore) CompleteMultipart(context.Context, string, string, []store.Part, store.PutOptions) error {
	g.call("meta")
	return nil
}
func (g *gateStore) AbortMultipart(context.Context, string, string) error { g.call("meta"); return nil }

var _ store.Store = (*gateStore)(nil)

type gateReader struct {
	io.Reader
	g    *gateStore
	once sync.Once
}

func (r *gateReader) Close() error {
	r.once.Do(func() { <-r.g.gate; r.g.leave("transfer") })
	return nil
}

// TestLimitHoldsPerKind starts three times as many calls of each method as its kind has slots:
// exactly the limit are in flight whenever every goroutine is blocked, each finished call lets
// exactly one more in, and the other kind's slots stay free meanwhile.
func TestLimitHoldsPerKind(t *testing.T) {
	const transfer, meta = 3, 2
	ctx := context.Background()
	methods := []struct {
		name, kind string
		call       func(st store.Store) error
	}{
		{"Stat", "meta", func(st store.Store) error { _, err := st.Stat(ctx, "k"); return err }},
		{"Put", "transfer", func(st store.Store) error { return st.Put(ctx, "k", strings.NewReader(""), 0, store.PutOptions{}) }},
		{"GetRange", "transfer", func(st store.Store) error {
			rc, err := st.GetRange(ctx, "k", 0, 1)
			if err != nil {
				return err
			}
			if _, err := io.ReadAll(rc); err != nil {
				return err
			}
			return errors.Join(rc.Close(), rc.Close()) // a second Close gives nothing back twice
		}},
		{"List", "meta", func(st store.Store) error { return st.List(ctx, "", func(store.Info) error { return nil }) }},
		{"Delete", "meta", func(st store.Store) error { return st.Delete(ctx, "k") }},
		{"CreateMultipart", "meta", func(st store.Store) error { _, err := st.CreateMultipart(ctx, "k", store.PutOptions{}); return err }},
		{"ListUploads", "meta", func(st store.Store) error { _, err := st.ListUploads(ctx, "k"); return err }},
		{"UploadPart", "transfer", func(st store.Store) error {
			_, err := st.UploadPart(ctx, "k", "id", 1, strings.NewReader(""), 0, 0)
			return err
		}},
		{"ListParts", "meta", func(st store.Store) error { _, err := st.ListParts(ctx, "k", "id"); return err }},
		{"CompleteMultipart", "meta", func(st store.Store) error { return st.CompleteMultipart(ctx, "k", "id", nil, store.PutOptions{}) }},
		{"AbortMultipart", "meta", func(st store.Store) error { return st.AbortMultipart(ctx, "k", "id") }},
	}
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGateStore()
				defer close(g.gate) // a failed check lets every call go
				st := store.Limit(g, store.Limits{Transfer: transfer, Meta: meta})
				limit, other, otherKind := transfer, meta, "meta"
				if m.kind == "meta" {
					limit, other, otherKind = meta, transfer, "transfer"
				}
				calls := 3 * limit
				errs := make(chan error, calls+other)
				for range calls {
					go func() { errs <- m.call(st) }()
				}
				synctest.Wait()
				if now, _ := g.counts(m.kind); now != limit {
					t.Fatalf("%d %s calls in flight, want the limit %d", now, m.kind, limit)
				}
				// The other kind is not held up by this one.
				otherCall := methods[0].call // Stat
				if otherKind == "transfer" {
					otherCall = methods[1].call // Put
				}
				for range other {
					go func() { errs <- otherCall(st) }()
				}
				synctest.Wait()
				if now, _ := g.counts(otherKind); now == 0 {
					t.Fatalf("no %s call got in while the %s slots were full", otherKind, m.kind)
				}
				for range calls + other {
					g.gate <- struct{}{}
					synctest.Wait()
					if _, most := g.counts(m.kind); most > limit {
						t.Fatalf("%d %s calls were in flight at once, limit %d", most, m.kind, limit)
					}
				}
				for range calls + other {
					if err := <-errs; err != nil {
						t.Fatal(err)
					}
				}
				if _, most := g.counts(otherKind); most > other {
					t.Fatalf("%d %s calls were in flight at once, limit %d", most, otherKind, other)
				}
			})
		})
	}
}

// TestLimitCancelledWait: a call waiting for a slot returns its context's error and takes no
// slot, so the next call still gets in once the holder finishes.
func TestLimitCancelledWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGateStore()
		st := store.Limit(g, store.Limits{Transfer: 1, Meta: 1})
		go st.Delete(context.Background(), "held")
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- st.Delete(ctx, "waits") }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v, want context.Canceled", err)
		}
		g.gate <- struct{}{} // the holder finishes
		go st.Delete(context.Background(), "next")
		synctest.Wait()
		if now, _ := g.counts("meta"); now != 1 {
			t.Fatalf("%d calls in flight after the cancelled wait, want 1", now)
		}
		g.gate <- struct{}{}
	})
}
