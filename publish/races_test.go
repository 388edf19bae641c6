package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pdq/publish/store"
)

// writeVariant writes the test checkpoint with content of its own: the shards are the same but
// config.json and one shard differ, so every object two variants would share a key under differs.
func writeVariant(t testing.TB, dir string, variant int) {
	t.Helper()
	writeCheckpoint(t, dir, 1)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "test", "variant": `+string(rune('0'+variant))+"}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), safetensorsBytes(map[string]tensor{
		"layers.0.mlp.weight": {"BF16", bf16Bytes(3<<20, uint64(100+variant))},
	}), 0o644)
}

// racePublish runs trials of two publishes of different content to one version at once:
// exactly one must succeed, the other fail with ErrAlreadyPublished, and the version must verify
// byte for byte and pull back as the winner's files.
func racePublish(t *testing.T, newStore func(t *testing.T, trial int) store.Store) {
	srcs := []string{t.TempDir(), t.TempDir()}
	writeVariant(t, srcs[0], 1)
	writeVariant(t, srcs[1], 2)
	for trial := range 5 {
		st := newStore(t, trial)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				opts := quiet()
				opts.Compress = i == 1 // one compressed, one not: different keys and sizes too
				_, errs[i] = Publish(context.Background(), st, srcs[i], opts)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("trial %d: both publishes succeeded", trial)
				}
				winner = i
			case errors.Is(err, ErrAlreadyPublished):
			default:
				t.Fatalf("trial %d: publish %d failed otherwise: %v", trial, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("trial %d: neither publish succeeded: %v", trial, errs)
		}
		res, err := Verify(context.Background(), st, VerifyOptions{Deep: true})
		if err != nil || !res.OK {
			t.Fatalf("trial %d: deep verify of the result = %+v, %v", trial, res, err)
		}
		out := t.TempDir()
		if _, err := Pull(context.Background(), st, out, PullOptions{Log: discardLog}); err != nil {
			t.Fatalf("trial %d: pull: %v", trial, err)
		}
		sameTree(t, srcs[winner], out)
		// The loser took its objects away again: only the manifest's objects are left.
		m, _, _ := ReadManifest(context.Background(), st)
		named := map[string]bool{ManifestKey: true}
		for _, f := range m.Files {
			named[f.Key] = true
		}
		st.List(context.Background(), "", func(i store.Info) error {
			if !named[i.Key] && !strings.HasPrefix(i.Key, store.ReservedPrefix+"/") {
				t.Errorf("trial %d: object %s left by the losing publish", trial, i.Key)
			}
			return nil
		})
		t.Logf("trial %d: publish %d won; the other: %v", trial, winner, errs[1-winner])
	}
}

func TestConcurrentPublishLocal(t *testing.T) {
	racePublish(t, func(t *testing.T, _ int) store.Store { return localStore(t, t.TempDir()) })
}

func TestS3ConcurrentPublish(t *testing.T) {
	e := newS3(t)
	racePublish(t, func(t *testing.T, trial int) store.Store { return e.srv.Store(t, "models/race/v1") })
}

// A version holding y and y.parts: pull's range log of y must not be taken for the file y.parts
// (or the other way round), in any of many pulls.
func TestPullNamesCannotMeetWorkingFiles(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "y"), bf16Bytes(6<<20, 5), 0o644) // 12 MiB: several ranges
	os.WriteFile(filepath.Join(src, "y.parts"), []byte("0\n1\n2\n"), 0o644)
	os.WriteFile(filepath.Join(src, "y.zipnn"), []byte("not a container\n"), 0o644)
	st := localStore(t, t.TempDir())
	if _, err := Publish(context.Background(), st, src, quiet()); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		out := t.TempDir()
		if _, err := Pull(context.Background(), st, out, PullOptions{PartSize: 1 << 20, Parallel: 4, Log: discardLog}); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
		sameTree(t, src, out)
	}
}
