//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pdq/publish/store"
	"pdq/publish/store/s3store/s3test"
)

// --timeout reaches the store: against a frozen server (SIGSTOP) publish and pull fail on their
// own with the stalled-server error and its hint; once the server runs again the same commands
// succeed. The context's deadline is only a safety net.
func TestPublishPullFrozenServerTimeoutFlag(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.SetEnv(t)
	url := "s3://" + bucket + "/tiny/v1"
	o := pubFlags()
	o.timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	decode := pubTestDir(t)

	srv.Freeze(t)
	err := runPublish(ctx, new(bytes.Buffer), decode, url, o)
	if !errors.Is(err, store.ErrStalled) || ctx.Err() != nil || !strings.Contains(err.Error(), "nothing for 300ms") {
		t.Fatalf("publish to a frozen server: %v", err)
	}
	if h := hintFor(err); !strings.Contains(h, "rerun the same command") {
		t.Errorf("hint %q", h)
	}
	err = runPull(ctx, new(bytes.Buffer), url, t.TempDir(), o.storeFlags)
	if !errors.Is(err, store.ErrStalled) || ctx.Err() != nil {
		t.Fatalf("pull from a frozen server: %v", err)
	}
	srv.Thaw(t)
	if err := runPublish(ctx, new(bytes.Buffer), decode, url, o); err != nil {
		t.Fatalf("publish once the server runs: %v", err)
	}
	if err := runPull(ctx, new(bytes.Buffer), url, t.TempDir(), o.storeFlags); err != nil {
		t.Fatalf("pull once the server runs: %v", err)
	}
}
