package convert_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pdq/quantize/convert"
)

// TestReviewResumeAfterSourceChanged: a run that stopped with ErrSourceChanged has shards made
// from the source as it was; resuming it (what rerunning the same command does) must not finish
// the output from the changed source and call it complete.
func TestReviewResumeAfterSourceChanged(t *testing.T) {
	src := copyDir(t, smallSource(t))
	ents, _ := os.ReadDir(src)
	var first string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".safetensors") {
			first = filepath.Join(src, e.Name())
			break
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	var once sync.Once
	ro := convert.RunOptions{Workers: 2, Progress: func(int64, int64, string) {
		once.Do(func() {
			later := time.Now().Add(time.Hour)
			os.Chtimes(first, later, later)
		})
	}}
	if _, err := runPlan(plan(t, src, smallOptions), out, ro); !errors.Is(err, convert.ErrSourceChanged) {
		t.Fatalf("first run: got %v, want ErrSourceChanged", err)
	}
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Resume}); err == nil {
		t.Fatal("resume over a source that changed during the interrupted run succeeded")
	}
	// Starting over is the way out.
	if _, err := runPlan(plan(t, src, smallOptions), out, convert.RunOptions{Workers: 2, Existing: convert.Restart}); err != nil {
		t.Fatalf("force: %v", err)
	}
}
