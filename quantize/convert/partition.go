package convert

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Part names one part of a conversion split across machines: part Index (0-based) of Count.
// The zero Part is the whole conversion.
type Part struct {
	Index, Count int
}

// ErrBadPart: a part specification that is not I/N with 0 <= I < N.
var ErrBadPart = errors.New("bad part")

// ParsePart reads "I/N" (0-based I).
func ParsePart(s string) (Part, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Part{}, fmt.Errorf("%w %q: want I/N, part I (counted from 0) of N, e.g. 0/4", ErrBadPart, s)
	}
	p := Part{Index: i, Count: n}
	return p, p.check()
}

func (p Part) check() error {
	if p.Count < 1 || p.Index < 0 || p.Index >= p.Count {
		return fmt.Errorf("%w %d/%d: want 0 <= I < N", ErrBadPart, p.Index, p.Count)
	}
	return nil
}

// Whole reports whether p is the whole conversion (the zero Part). Part 0/1 is not: it is a
// split into one part, finished by Merge like any other.
func (p Part) Whole() bool { return p.Count == 0 }

// String is "I/N".
func (p Part) String() string { return fmt.Sprintf("%d/%d", p.Index, p.Count) }

// partJournalFormat names a part's journal file.
const partJournalFormat = ".pdq-journal.part-%04d-of-%04d.json"

// journalName is the journal file of a part; the whole conversion's is JournalName.
func (p Part) journalName() string {
	if p.Whole() {
		return JournalName
	}
	return fmt.Sprintf(partJournalFormat, p.Index, p.Count)
}

// lockName is the run lock file of a part (of the whole conversion for the zero Part).
func (p Part) lockName() string { return p.journalName() + ".lock" }

// parsePartJournal reads the part a journal file name belongs to.
func parsePartJournal(name string) (Part, bool) {
	var p Part
	_, err := fmt.Sscanf(name, partJournalFormat, &p.Index, &p.Count)
	return p, err == nil && p.Count > 0
}

// WorkUnit is one output file a part writes: a shard of prefill/ or decode/, or a source shard
// copied into prefill/.
type WorkUnit struct {
	Key   string  // output-relative path, as in the journal ("decode/model-00001-of-00009.safetensors")
	Bytes int64   // the file's size
	Cost  float64 // estimated CPU seconds to produce it
	first int     // index of the first module it holds, for ordering
	shard int     // shard index within its output (or the source shard index)
	set   OutputKind
}

// PartPlan is what one part of a split conversion writes.
type PartPlan struct {
	Part  Part
	Units []WorkUnit
	Bytes int64
	Cost  float64 // estimated CPU seconds
}

// Estimated CPU nanoseconds per weight of each kind of work (AVX-512 kernels, docs/QUALITY.md):
// the partition balances these, so only their ratios matter.
const (
	nsInt4RTN      = 3
	nsInt4MSE      = 12
	nsInt4Weighted = 20
	nsGPTQPerCol   = 0.4 // GPTQ per weight and input column: the factorization and updates grow with K
	nsFP8Block     = 3
	nsDense        = 1.5
	nsCopyByte     = 0.3
)

// moduleCost estimates the CPU seconds module m costs in output kind.
func (p *Plan) moduleCost(m *Module, kind OutputKind) float64 { return p.bound(m, kind).Cost() }

// units lists every file of the conversion, each with its cost, in the order parts take them:
// by the first module each holds, so a part's prefill and decode shards cover the same modules
// and a module is computed by more than one part only at the borders between parts.
func (p *Plan) units() []WorkUnit {
	var us []WorkUnit
	for _, out := range p.Outputs {
		if out.CopySource {
			idx := map[string]int{}
			for i, s := range p.Source.Shards {
				idx[s.Name] = i
				us = append(us, WorkUnit{Key: string(out.Kind) + "/" + s.Name, Bytes: s.Size, Cost: float64(s.Size) * nsCopyByte * 1e-9,
					first: len(p.Modules), shard: i, set: out.Kind})
			}
			for mi, m := range p.Modules {
				if u := &us[len(us)-len(p.Source.Shards)+idx[m.Weight.Shard.Name]]; mi < u.first {
					u.first = mi
				}
			}
			continue
		}
		base := len(us)
		for i, sh := range out.Shards {
			us = append(us, WorkUnit{Key: string(out.Kind) + "/" + sh.FileName, Bytes: sh.Layout.FileSize, first: len(p.Modules), shard: i, set: out.Kind})
		}
		for mi, m := range p.Modules {
			specs := p.OutputSpecs(m, out.Kind)
			if len(specs) == 0 {
				continue
			}
			u := &us[base+out.Where[specs[0].Name]]
			u.Cost += p.moduleCost(m, out.Kind)
			u.first = min(u.first, mi)
		}
	}
	sort.SliceStable(us, func(a, b int) bool { return us[a].first < us[b].first })
	return us
}

// Partition splits the conversion into n parts of about equal estimated cost: the units in
// order, cut where the running cost crosses k/n of the total (a unit goes to the part its
// middle falls in). The result depends only on the plan and n.
func (p *Plan) Partition(n int) ([]PartPlan, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d parts (want at least 1)", ErrBadPart, n)
	}
	us := p.units()
	if n > len(us) {
		// Each output file is written by one part: more parts would have nothing to do (and a
		// count near 2^63 would ask for more memory than there is).
		return nil, fmt.Errorf("%w: %d parts, but the conversion writes %d files: at most %d parts", ErrBadPart, n, len(us), len(us))
	}
	var total float64
	for i := range us {
		us[i].Cost += 1e-6 // every unit weighs something: empty shards spread too
		total += us[i].Cost
	}
	parts := make([]PartPlan, n)
	for i := range parts {
		parts[i].Part = Part{Index: i, Count: n}
	}
	var run float64
	for _, u := range us {
		k := min(n-1, int(float64(n)*(run+u.Cost/2)/total))
		run += u.Cost
		pp := &parts[k]
		pp.Units = append(pp.Units, u)
		pp.Bytes += u.Bytes
		pp.Cost += u.Cost
	}
	return parts, nil
}

// ownedKeys returns the journal keys part pt writes, or nil for the whole conversion.
func (p *Plan) ownedKeys(pt Part) (map[string]bool, error) {
	if pt.Whole() {
		return nil, nil
	}
	if err := pt.check(); err != nil {
		return nil, err
	}
	parts, err := p.Partition(pt.Count)
	if err != nil {
		return nil, err
	}
	own := map[string]bool{}
	for _, u := range parts[pt.Index].Units {
		own[u.Key] = true
	}
	return own, nil
}
