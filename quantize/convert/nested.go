package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrInsideOutput: the output directory lies inside another conversion's output (running or
// finished). A conversion there would mix its files into the other's outputs, which verify and
// publish then take for the other's.
var ErrInsideOutput = errors.New("output directory is inside another conversion's output")

// ErrNothingToResume: a resume was asked of a non-empty directory that holds no conversion
// journal: there is nothing to continue, and starting afresh there would mix outputs.
var ErrNothingToResume = errors.New("output directory holds no conversion to resume")

// checkNotNested refuses dir when a directory above it holds a conversion: its journal, a part
// journal or a run lock.
func checkNotNested(dir string) error {
	out, err := resolvePath(dir)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for cur := filepath.Dir(out); ; cur = filepath.Dir(cur) {
		if holdsConversion(cur) {
			return fmt.Errorf("convert: %s: %w %s", dir, ErrInsideOutput, cur)
		}
		if cur == filepath.Dir(cur) {
			return nil
		}
	}
}

// holdsConversion reports whether dir holds a conversion's journal, a part journal or a run lock.
func holdsConversion(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, JournalName)); err == nil {
		return true
	}
	if _, err := os.Lstat(filepath.Join(dir, JournalName+".lock")); err == nil {
		return true
	}
	names, _ := partJournals(dir)
	if len(names) > 0 {
		return true
	}
	locks, _ := filepath.Glob(filepath.Join(dir, ".pdq-journal.part-*.json.lock"))
	return len(locks) > 0
}

// checkResumable refuses a resume of a directory that holds files but no journal of a whole or
// split conversion.
func checkResumable(dir string, ents []os.DirEntry) error {
	for _, e := range ents {
		if n := e.Name(); n == JournalName || strings.HasPrefix(n, ".pdq-journal.part-") && strings.HasSuffix(n, ".json") {
			return nil
		}
	}
	return fmt.Errorf("convert: %s: %w", dir, ErrNothingToResume)
}
