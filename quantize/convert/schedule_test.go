package convert

import (
	"context"
	"testing"
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
