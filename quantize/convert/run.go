package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"pdq/kernels"
)

// RunOptions control how a plan is executed (not what it produces).
type RunOptions struct {
	Workers     int             // compute workers; <= 0 means GOMAXPROCS
	MaxMemory   int64           // bytes of tensor data in flight (default 4 GiB)
	PrefillMode string          // "copy" (default) or "link": how an FP8 source's shards reach prefill/
	Resume      bool            // continue a run in a non-empty output directory
	Force       bool            // start over in a non-empty output directory
	Backend     kernels.Backend // nil: the CPU backend
	Device      string          // recorded in the report ("cpu", or the GPU name)
	Tool        string          // tool name and version recorded in outputs
	Part        Part            // one part of a split conversion (the zero Part: all of it)
	// Progress, when set, is called with the source bytes done after each slab (from any goroutine).
	Progress func(done, total int64, tensor string)
}

// ErrNotEmpty: the output directory holds files and neither Resume nor Force was given.
var ErrNotEmpty = errors.New("output directory is not empty (use --resume to continue or --force to start over)")

// ErrOtherPlan: the output directory's journal was written for another source or other options.
var ErrOtherPlan = errors.New("output directory was started with other options or another source (use --force to start over)")

// ErrSourceChanged: a source shard changed while it was being converted.
var ErrSourceChanged = errors.New("source shard changed during the conversion")

// DefaultMaxMemory is the default budget of tensor bytes in flight.
const DefaultMaxMemory = 4 << 30

// runner is the state of one conversion.
type runner struct {
	plan            *Plan
	ro              RunOptions
	dir             string
	prefill, decode *shardSet
	journal         *journal
	jmu             sync.Mutex
	results         [][]slabResult
	left            []atomic.Int32 // slabs left per module
	records         map[string][]record
	done            atomic.Int64
	total           int64
	budget          *budget
	own             map[string]bool // a part's files (journal keys); nil: every file
	emits           [][2]bool       // per module: whether this run computes its prefill, decode tensors
	factors         factorCache     // GPTQ factors shared by modules reading the same input
}

// Run executes plan p into dir (dir/prefill, dir/decode, dir/report.json) and returns the report.
// With ro.Part set to a part of a split conversion it writes only that part's shards and its
// own journal, and returns the report rows of what it wrote; Merge then finishes dir.
func Run(ctx context.Context, p *Plan, dir string, ro RunOptions) (*Report, error) {
	if err := ro.defaults(); err != nil {
		return nil, err
	}
	own, err := p.ownedKeys(ro.Part)
	if err != nil {
		return nil, err
	}
	if err := checkApart(p.Source, dir); err != nil {
		return nil, err
	}
	if err := prepareDir(dir, ro); err != nil {
		return nil, err
	}
	id := p.ID()
	if !ro.Part.Whole() {
		if err := checkSiblings(dir, ro.Part, id); err != nil {
			return nil, err
		}
	}
	j, err := loadJournal(dir, ro.Part.journalName())
	if err != nil {
		return nil, err
	}
	if j.PlanID != "" && j.PlanID != id {
		return nil, fmt.Errorf("convert: %s: %w", dir, ErrOtherPlan)
	}
	j.PlanID = id
	if err := verifyJournal(ctx, dir, j); err != nil {
		return nil, err
	}
	if err := j.save(dir); err != nil {
		return nil, err
	}
	r, err := newRunner(p, dir, ro, j, own)
	if err != nil {
		return nil, err
	}
	// An FP8 source's shards are copied to prefill/ beside the conversion; a failure of either
	// stops the other.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	copied := make(chan error, 1)
	if p.Prefill != nil && p.Prefill.CopySource {
		go func() {
			err := r.copySource(ctx)
			if err != nil {
				cancel(err)
			}
			copied <- err
		}()
	} else {
		copied <- nil
	}
	err = r.convert(ctx)
	if err != nil {
		cancel(err)
	}
	if cerr := <-copied; cerr != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = cerr
	}
	if err != nil {
		for _, set := range r.sets() {
			set.abort()
		}
		return nil, err
	}
	if err := checkSourceUnchanged(p.Source); err != nil {
		return nil, err
	}
	if !ro.Part.Whole() {
		return r.partDone()
	}
	return r.finish()
}

// defaults fills in and checks the run options.
func (ro *RunOptions) defaults() error {
	if ro.Workers <= 0 {
		ro.Workers = runtime.GOMAXPROCS(0)
	}
	if ro.MaxMemory <= 0 {
		ro.MaxMemory = DefaultMaxMemory
	}
	if ro.PrefillMode == "" {
		ro.PrefillMode = "copy"
	}
	if ro.PrefillMode != "copy" && ro.PrefillMode != "link" {
		return fmt.Errorf("%w: prefill mode %q (want copy or link)", ErrBadOptions, ro.PrefillMode)
	}
	if ro.Tool == "" {
		ro.Tool = "pdq"
	}
	if !ro.Part.Whole() {
		if err := ro.Part.check(); err != nil {
			return err
		}
		if ro.Force {
			return fmt.Errorf("%w: a part never deletes the shared output directory (other parts write there); remove it yourself to start over", ErrBadOptions)
		}
	}
	return nil
}

// newRunner sets up the state of a run over journal j; own, when not nil, holds the journal
// keys of the files this run may write (a part's), the rest count as written by others.
func newRunner(p *Plan, dir string, ro RunOptions, j *journal, own map[string]bool) (*runner, error) {
	r := &runner{plan: p, ro: ro, dir: dir, journal: j, own: own, records: map[string][]record{}, budget: newBudget(ro.MaxMemory)}
	for _, out := range []*Output{p.Prefill, p.Decode} {
		if out == nil || out.CopySource {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, out.Kind), 0o755); err != nil {
			return nil, fmt.Errorf("convert: %w", err)
		}
		set := newShardSet(out, filepath.Join(dir, out.Kind), j, own)
		if out.Kind == "prefill" {
			r.prefill = set
		} else {
			r.decode = set
		}
	}
	for _, fs := range j.Shards {
		for _, rec := range fs.Records {
			k := rec.Row.Output + "\x00" + rec.Row.Tensor
			r.records[k] = append(r.records[k], rec)
		}
	}
	return r, nil
}

// sets returns the shard sets of the outputs this run writes.
func (r *runner) sets() []*shardSet {
	var s []*shardSet
	for _, set := range []*shardSet{r.prefill, r.decode} {
		if set != nil {
			s = append(s, set)
		}
	}
	return s
}

// prepareDir creates dir or checks that it may be used. A part of a split conversion uses a
// non-empty dir (other parts write there) and never deletes anything; Force deletes what a
// conversion writes, part journals included, and nothing else.
func prepareDir(dir string, ro RunOptions) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if len(ents) == 0 || !ro.Part.Whole() {
		return nil
	}
	parts, err := partJournals(dir)
	if err != nil {
		return err
	}
	switch {
	case ro.Force:
		names := append([]string{"prefill", "decode", "report.json", JournalName}, parts...)
		for _, name := range names {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("convert: %w", err)
			}
		}
		return nil
	case ro.Resume:
		return nil
	}
	if len(parts) > 0 {
		return fmt.Errorf("convert: %s: %w", dir, ErrSplitDir)
	}
	return fmt.Errorf("convert: %s: %w", dir, ErrNotEmpty)
}
