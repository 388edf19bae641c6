package convert

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJournalAppendAndTornLine: entries are appended one line each; a line torn by a crash ends
// the journal and the entries before it survive.
func TestJournalAppendAndTornLine(t *testing.T) {
	dir := t.TempDir()
	j := &journal{name: JournalName, PlanID: "p1", Shards: map[string]*finishedShard{}}
	if err := j.save(dir); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"decode/a", "decode/b", "prefill/c"} {
		if err := j.add(dir, k, &finishedShard{Size: 7, SHA256: "h-" + k}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := loadJournal(dir, JournalName)
	if err != nil {
		t.Fatal(err)
	}
	if got.PlanID != "p1" || len(got.Shards) != 3 || got.Shards["decode/b"].SHA256 != "h-decode/b" {
		t.Fatalf("reloaded journal: %+v", got)
	}
	path := filepath.Join(dir, JournalName)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-10], 0o644); err != nil { // tear the last line
		t.Fatal(err)
	}
	got, err = loadJournal(dir, JournalName)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Shards) != 2 || got.Shards["prefill/c"] != nil {
		t.Fatalf("torn journal should keep the first two entries: %v", got.Shards)
	}
	// Rewriting after verification keeps what survived, in a stable order.
	if err := got.save(dir); err != nil {
		t.Fatal(err)
	}
	again, err := loadJournal(dir, JournalName)
	if err != nil || len(again.Shards) != 2 {
		t.Fatalf("after save: %v %v", again, err)
	}
}
