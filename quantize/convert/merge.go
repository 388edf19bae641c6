package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"pdq/internal/fsutil"
	"pdq/quantize/report"
)

// ErrSplitDir: a whole conversion was asked of an output directory that holds the parts of a
// split one.
var ErrSplitDir = errors.New("output directory holds parts of a split conversion")

// ErrPartsIncomplete: Merge found a part missing, unfinished, or run with another plan.
var ErrPartsIncomplete = errors.New("the parts of the conversion are not all finished")

// partJournals lists the part journal files in dir, sorted.
func partJournals(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, ".pdq-journal.part-") && strings.HasSuffix(n, ".json") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// partCount returns the N of the part journals in dir; they must agree.
func partCount(dir string) (int, error) {
	names, err := partJournals(dir)
	if err != nil {
		return 0, err
	}
	counts := map[int]bool{}
	for _, n := range names {
		if p, ok := parsePartJournal(n); ok {
			counts[p.Count] = true
		}
	}
	switch len(counts) {
	case 0:
		return 0, fmt.Errorf("convert: %s: %w: no part has started here", dir, ErrPartsIncomplete)
	case 1:
		for c := range counts {
			return c, nil
		}
	}
	var cs []string
	for c := range counts {
		cs = append(cs, fmt.Sprint(c))
	}
	sort.Strings(cs)
	return 0, fmt.Errorf("convert: %s: %w: parts of splits into %s parts are mixed here", dir, ErrPartsIncomplete, strings.Join(cs, " and "))
}

// checkSiblings refuses a part whose split differs from the parts already in dir: another
// number of parts, or another plan (source or options). Parts of different splits would write
// the same files.
func checkSiblings(dir string, pt Part, pl *Plan, id string) error {
	names, err := partJournals(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p, ok := parsePartJournal(n)
		if !ok {
			continue
		}
		if p.Count != pt.Count {
			return fmt.Errorf("convert: %s: %w: it holds part %s of a split into %d parts, this is part %s", dir, ErrOtherPlan, p, p.Count, pt)
		}
		j, err := loadJournal(dir, n)
		if err != nil {
			return err
		}
		if j.PlanID != "" && j.PlanID != id {
			return otherPlanError(dir, ": part "+p.String(), j.Facts, pl.planFacts())
		}
	}
	return nil
}

// partDone checks that a part wrote every file it owns and returns the report rows of its tensors
// (a partial report, not written: Merge writes report.json).
func (r *runner) partDone() (*report.Report, error) {
	var missing []string
	for k := range r.own {
		if _, ok := r.journal.Shards[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("convert: internal: part %s left %d files unfinished (%s)", r.ro.Part, len(missing), missing[0])
	}
	return r.report(), nil
}

// Merge finishes a conversion that parts 0..N-1 wrote into dir (Run with RunOptions.Part): it
// checks that every part finished the plan p and that each of its files is still what the part
// recorded (size and CRC-32C, as a resume checks: the merge reads every output file once), then
// writes the indexes, configs, side files, report.json and the whole-conversion journal, exactly
// as a single Run does. The result is byte-identical to a single Run of p (the journal files
// aside). It refuses, naming the parts, when one is missing, unfinished, damaged since it
// finished, or was run with another source or options.
func Merge(ctx context.Context, p *Plan, dir string, ro RunOptions) (*report.Report, error) {
	ro.Part = Part{}
	if err := ro.defaults(); err != nil {
		return nil, err
	}
	if err := checkApart(p.Source, dir); err != nil {
		return nil, err
	}
	if err := checkNotNested(dir); err != nil {
		return nil, err
	}
	if err := checkSourceLinks(p); err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("convert: %s: %w: no part has started here", dir, ErrPartsIncomplete)
	}
	unlock, err := lockDir(dir, Part{})
	if err != nil {
		return nil, err
	}
	defer unlock()
	n, err := partCount(dir)
	if err != nil {
		return nil, err
	}
	parts, err := p.Partition(n)
	if err != nil {
		return nil, err
	}
	id := p.ID()
	all := newJournal(JournalName)
	all.PlanID, all.Facts = id, p.planFacts()
	var problems []string
	for _, pp := range parts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		free, err := fsutil.Lock(filepath.Join(dir, pp.Part.lockName()))
		if err != nil {
			problems = append(problems, fmt.Sprintf("part %s is still running (%v)", pp.Part, err))
			continue
		}
		free()
		j, err := loadJournal(dir, pp.Part.journalName())
		if err != nil {
			return nil, err
		}
		switch {
		case j.PlanID == "":
			problems = append(problems, fmt.Sprintf("part %s has not started", pp.Part))
			continue
		case j.PlanID != id:
			why := "another source or other options"
			if d := planDiff(j.Facts, p.planFacts()); d != "" {
				why += " (" + d + ")"
			}
			problems = append(problems, fmt.Sprintf("part %s was run with %s", pp.Part, why))
			continue
		}
		left, changed := 0, 0
		var first, firstChanged string
		for _, u := range pp.Units {
			fs, ok := j.Shards[u.Key]
			if !ok {
				if left == 0 {
					first = u.Key
				}
				left++
				continue
			}
			// The file must still be what the part recorded (size and CRC-32C), as a resume checks.
			size, sum, err := crcFile(ctx, filepath.Join(dir, filepath.FromSlash(u.Key)))
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if err != nil || size != fs.Size || fs.CRC32C == nil || sum != *fs.CRC32C {
				if changed == 0 {
					firstChanged = u.Key
				}
				changed++
				continue
			}
			all.Shards[u.Key] = fs
		}
		if left > 0 {
			problems = append(problems, fmt.Sprintf("part %s has %d of %d files left (%s)", pp.Part, left, len(pp.Units), first))
		}
		if changed > 0 {
			problems = append(problems, fmt.Sprintf("part %s has %d of %d files missing or changed since it finished (%s; run the part again to redo them)", pp.Part, changed, len(pp.Units), firstChanged))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("convert: %s: %w: %s", dir, ErrPartsIncomplete, strings.Join(problems, "; "))
	}
	if err := all.save(dir); err != nil {
		return nil, err
	}
	r, err := newRunner(p, dir, ro, all, nil)
	if err != nil {
		return nil, err
	}
	if err := checkSourceUnchanged(p.Source); err != nil {
		return nil, err
	}
	return r.finish()
}
