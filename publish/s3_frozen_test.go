//go:build unix

package publish

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pdq/publish/store"
	"pdq/publish/store/s3store"
)

// A server that stops answering mid-transfer (SIGSTOP: connections stay open, nothing comes
// back) fails publish and pull with store.ErrStalled on their own, after the idle timeout of
// each try, never hanging; once it runs again, the same publish and pull resume. The test's own
// deadline is only a safety net: reaching it fails the test.
func TestS3FrozenServerFailsThenResumes(t *testing.T) {
	e := newS3(t)
	cfg := e.srv.Config(e.bucket, e.prefix)
	cfg.Timeout = 500 * time.Millisecond
	st, err := s3store.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeCheckpoint(t, src, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var freeze sync.Once
	opts := quiet()
	var frozen time.Time
	opts.OnPart = func(string, int32) { freeze.Do(func() { e.srv.Freeze(t); frozen = time.Now() }) }
	_, err = Publish(ctx, st, src, opts)
	if !errors.Is(err, store.ErrStalled) || ctx.Err() != nil {
		t.Fatalf("publish to a frozen server: %v, want store.ErrStalled before the test's deadline", err)
	}
	t.Logf("publish failed %.1fs after the freeze (timeout %s): %v", time.Since(frozen).Seconds(), cfg.Timeout, err)
	e.srv.Thaw(t)
	opts.OnPart = nil
	res, err := Publish(ctx, st, src, opts)
	if err != nil {
		t.Fatalf("publish once the server answers again: %v", err)
	}
	kept := res.PartsReused
	for _, f := range res.Files {
		if f.Action == "skipped" {
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("the rerun kept nothing of the first publish: %+v", res.Files)
	}

	out := filepath.Join(t.TempDir(), "pulled")
	var freezePull sync.Once
	popts := PullOptions{PartSize: store.MinPartSize, Parallel: 2, Log: discardLog,
		OnRange: func(string, int) { freezePull.Do(func() { e.srv.Freeze(t); frozen = time.Now() }) }}
	_, err = Pull(ctx, st, out, popts)
	if !errors.Is(err, store.ErrStalled) || ctx.Err() != nil {
		t.Fatalf("pull from a frozen server: %v, want store.ErrStalled before the test's deadline", err)
	}
	t.Logf("pull failed %.1fs after the freeze (timeout %s): %v", time.Since(frozen).Seconds(), cfg.Timeout, err)
	e.srv.Thaw(t)
	popts.OnRange = nil
	pr, err := Pull(ctx, st, out, popts)
	if err != nil {
		t.Fatalf("pull once the server answers again: %v", err)
	}
	reused := 0
	for _, f := range pr.Files {
		reused += f.RangesReused
		if f.Action == "present" && f.Size > 0 {
			reused++
		}
	}
	if reused == 0 {
		t.Errorf("the second pull kept no range of the first: %+v", pr.Files)
	}
	sameTree(t, src, out)
}
