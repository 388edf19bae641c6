package par

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestForEach: every item runs once; the error is the lowest failing item's whatever the
// worker count; a cancelled context stops the run.
func TestForEach(t *testing.T) {
	for _, workers := range []int{1, 2, 7, 0} {
		var sum atomic.Int64
		if err := ForEach(context.Background(), 1000, workers, func(i int) error { sum.Add(int64(i)); return nil }); err != nil || sum.Load() != 999*1000/2 {
			t.Fatalf("workers %d: sum %d, %v", workers, sum.Load(), err)
		}
		for range 20 {
			err := ForEach(context.Background(), 100, workers, func(i int) error {
				if i == 40 || i == 41 || i == 90 {
					return fmt.Errorf("item %d", i)
				}
				return nil
			})
			if err == nil || err.Error() != "item 40" {
				t.Fatalf("workers %d: %v, want item 40", workers, err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ForEach(ctx, 10, 2, func(int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	var got [][2]int
	Chunks(context.Background(), 10, 4, 1, func(lo, hi int) error { got = append(got, [2]int{lo, hi}); return nil })
	if fmt.Sprint(got) != "[[0 4] [4 8] [8 10]]" {
		t.Fatalf("chunks %v", got)
	}
}

// TestSem: at most n holders at once; a cancelled wait holds nothing.
func TestSem(t *testing.T) {
	s := NewSem(2)
	ctx := context.Background()
	s.Acquire(ctx)
	s.Acquire(ctx)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Acquire(c); !errors.Is(err, context.Canceled) {
		t.Fatalf("third acquire: %v", err)
	}
	s.Release()
	if err := s.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 {
		t.Fatalf("%d held", len(s))
	}
}
