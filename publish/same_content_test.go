package publish

import (
	"context"
	"errors"
	"sync"
	"testing"

	"pdq/publish/store"
)

// Two publishes of the same content to one version at once: they write the same keys with the
// same bytes, completing and aborting each other's uploads; exactly one writes the manifest, the
// other fails with ErrAlreadyPublished, and the version verifies.
func sameContentRace(t *testing.T, newStore func(t *testing.T) store.Store) {
	src := t.TempDir()
	writeCheckpoint(t, src, 2) // a file of several parts
	for trial := range 5 {
		st := newStore(t)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() { _, errs[i] = Publish(context.Background(), st, src, quiet()) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("trial %d: %d publishes succeeded: %v", trial, ok, errs)
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrAlreadyPublished) {
				t.Errorf("trial %d: the loser failed otherwise: %v", trial, err)
			}
		}
		if res, err := Verify(context.Background(), st, VerifyOptions{Deep: true}); err != nil || !res.OK {
			t.Fatalf("trial %d: deep verify = %+v, %v", trial, res, err)
		}
	}
}

func TestConcurrentPublishSameContentLocal(t *testing.T) {
	sameContentRace(t, func(t *testing.T) store.Store { return localStore(t, t.TempDir()) })
}

func TestS3ConcurrentPublishSameContent(t *testing.T) {
	e := newS3(t)
	sameContentRace(t, func(t *testing.T) store.Store { return e.srv.Store(t, "models/same/v1") })
}
