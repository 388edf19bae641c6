package convert

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"pdq/internal/fsutil"
)

// TestReviewBudgetCancelledAcquire: an acquire that fails because the run was cancelled holds
// nothing: the bytes in flight stay as they were.
func TestBudgetCancelledAcquire(t *testing.T) {
	b := newBudget(100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.acquire(ctx, 40); err == nil {
		t.Fatal("acquire with a cancelled context succeeded")
	}
	if b.used != 0 {
		t.Errorf("a failed acquire left %d bytes in flight", b.used)
	}
}

// TestRawBufs: read buffers come aligned like their file offsets, are reused best fit, and at
// most maxIdleRaw are kept idle, the largest, and at most maxIdleRawBytes.
func TestRawBufs(t *testing.T) {
	var p rawBufs
	var bases [][]byte
	for i := range maxIdleRaw + 4 {
		n := int64(1000 + 100*i)
		buf, base := p.get(n, int64(i*777))
		if int64(len(buf)) != n || (uintptr(unsafe.Pointer(unsafe.SliceData(buf)))-uintptr(i*777))%fsutil.DirectAlign != 0 {
			t.Fatalf("get(%d, %d): %d bytes at an address not congruent to the offset", n, i*777, len(buf))
		}
		bases = append(bases, base)
	}
	for _, b := range bases {
		p.put(b)
	}
	if len(p.idle) != maxIdleRaw {
		t.Fatalf("%d idle buffers kept, want %d", len(p.idle), maxIdleRaw)
	}
	for _, b := range p.idle {
		if cap(b) < 1000+100*4+fsutil.DirectAlign {
			t.Fatalf("a %d-byte buffer kept while larger ones were dropped", cap(b))
		}
	}
	_, base := p.get(1500, 0) // the best fit: the smallest buffer holding 1500+DirectAlign
	if want := 1500 + fsutil.DirectAlign; cap(base) < want || cap(base) > want+100 {
		t.Fatalf("got a %d-byte buffer for %d", cap(base), want)
	}
	if len(p.idle) != maxIdleRaw-1 {
		t.Fatalf("%d idle after a get, want %d", len(p.idle), maxIdleRaw-1)
	}
	var big [][]byte
	for range 8 {
		_, b := p.get(maxIdleRawBytes/4, 0)
		big = append(big, b)
	}
	for _, b := range big {
		p.put(b)
	}
	if p.bytes > maxIdleRawBytes {
		t.Fatalf("%d bytes idle, more than %d", p.bytes, maxIdleRawBytes)
	}
}

// TestBudgetTurns: a request is served only after every earlier turn's, even when it would fit
// at once; a cancelled turn releases the ones waiting behind it with the error.
func TestBudgetTurns(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	served := make(chan int64, 3)
	for _, turn := range []int64{2, 1} {
		go func() {
			if err := b.acquireTurn(ctx, 10, turn); err != nil {
				t.Error(err)
			}
			served <- turn
		}()
	}
	select {
	case turn := <-served:
		t.Fatalf("turn %d served before turn 0", turn)
	case <-time.After(50 * time.Millisecond):
	}
	if err := b.acquireTurn(ctx, 10, 0); err != nil {
		t.Fatal(err)
	}
	if first, second := <-served, <-served; first != 1 || second != 2 {
		t.Errorf("turns served as %d, %d after 0; want 1, 2", first, second)
	}

	// Turn 3 waits for room behind a full budget, turn 4 for turn 3; cancelling ends both.
	cctx, cancel := context.WithCancel(ctx)
	if err := b.acquireTurn(cctx, 70, -1); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, turn := range []int64{3, 4} {
		go func() { errs <- b.acquireTurn(cctx, 10, turn) }()
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	for range 2 {
		if err := <-errs; err == nil {
			t.Error("a waiting turn was served after its context was cancelled")
		}
	}
	if b.used != 100 {
		t.Errorf("%d bytes in use, want 100 (the cancelled turns hold nothing)", b.used)
	}
}
