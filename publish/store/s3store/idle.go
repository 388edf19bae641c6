package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"pdq/publish/store"
)

// DefaultTimeout is the idle timeout of a store whose Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// stalledError is the error of a request that moved no byte for longer than the idle timeout.
// It is a timeout (net.Error), so the SDK tries the request again, up to its attempts.
type stalledError struct{ after time.Duration }

// Error implements error.
func (e *stalledError) Error() string {
	return fmt.Sprintf("nothing sent or received for %s", e.after)
}

// Timeout says the error is a timeout: the SDK retries it.
func (e *stalledError) Timeout() bool { return true }

// Temporary says the error may pass.
func (e *stalledError) Temporary() bool { return true }

// Is makes a stalled request's error match store.ErrStalled.
func (e *stalledError) Is(target error) bool { return target == store.ErrStalled }

// idleClient is the SDK's HTTP client with an idle timeout on every request: a request fails
// once it has waited on the network for longer than idle without a byte going either way (its
// body not taken by the connection, no response headers, a read of the response body not
// answered). Time the caller spends between reads of a response body does not count, so a slow
// consumer (a full disk, a slow hash) never fails a download. Unlike a deadline on the whole
// request, a transfer of any size runs as long as bytes move.
type idleClient struct {
	client *http.Client
	idle   time.Duration
	tick   time.Duration // how often the watchdog looks (idle/8, at least 10ms)
}

func newIdleClient(tr http.RoundTripper, idle time.Duration) *idleClient {
	c := &idleClient{client: &http.Client{Transport: tr, CheckRedirect: noRedirect}, idle: idle}
	c.tick = max(idle/8, 10*time.Millisecond)
	return c
}

// noRedirect hands redirects to the SDK, which treats them as answers (as its own client does).
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Do implements the SDK's HTTPClient.
func (c *idleClient) Do(req *http.Request) (*http.Response, error) {
	if c.idle <= 0 {
		return c.client.Do(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{idle: c.idle, cancel: cancel, stop: make(chan struct{})}
	w.touch(true)
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &touchBody{ReadCloser: req.Body, w: w}
	}
	go w.run(ctx, c.tick)
	resp, err := c.client.Do(req)
	if err != nil {
		w.end()
		if cause := context.Cause(ctx); errors.Is(cause, store.ErrStalled) {
			return resp, cause
		}
		return resp, err
	}
	// From here on only the time spent inside a read of the body counts.
	w.touch(false)
	resp.Body = &watchedBody{rc: resp.Body, w: w, ctx: ctx}
	return resp, nil
}

// watch cancels a request that waits on the network for longer than idle.
type watch struct {
	idle    time.Duration
	cancel  context.CancelCauseFunc
	last    atomic.Int64 // unix ns of the last progress
	waiting atomic.Bool  // the request waits on the network (false: on its caller)
	stop    chan struct{}
	once    sync.Once
}

func (w *watch) touch(waiting bool) {
	w.last.Store(time.Now().UnixNano())
	w.waiting.Store(waiting)
}

func (w *watch) run(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case now := <-t.C:
			if w.waiting.Load() && now.UnixNano()-w.last.Load() > int64(w.idle) {
				w.cancel(&stalledError{after: w.idle})
				return
			}
		}
	}
}

func (w *watch) end() {
	w.once.Do(func() {
		close(w.stop)
		w.cancel(nil)
	})
}

// touchBody counts every read of a request body as progress: the connection took the bytes
// before.
type touchBody struct {
	io.ReadCloser
	w *watch
}

// Read implements io.Reader.
func (b *touchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.last.Store(time.Now().UnixNano())
	return n, err
}

// watchedBody is a response body whose reads are timed; closing it ends the watch.
type watchedBody struct {
	rc  io.ReadCloser
	w   *watch
	ctx context.Context
}

// Read implements io.Reader.
func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.touch(true)
	n, err := b.rc.Read(p)
	b.w.touch(false)
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, store.ErrStalled) {
			err = cause
		}
	}
	return n, err
}

// Close implements io.Closer.
func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.w.end()
	return err
}
