package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"pdq/internal/fsutil"
	"pdq/kernels"
	"pdq/quantize/report"
	"pdq/safetensors"
)

// Existing says what a run does with an output directory that already holds files.
type Existing int

const (
	// Refuse a non-empty output directory (ErrNotEmpty).
	Refuse Existing = iota
	// Resume the conversion recorded in the directory's journal, keeping its finished shards
	// (refused with ErrOtherPlan when it was started with other options or another source).
	Resume
	// Restart deletes what an earlier conversion wrote there (prefill/, decode/, report.json,
	// journals) and nothing else, then starts over.
	Restart
)

// PrefillMode is how an FP8 source's shards reach prefill/.
type PrefillMode string

// The prefill modes.
const (
	PrefillCopy  PrefillMode = "copy"  // cloned where the file system can (blocks shared), else written as PrefillWrite
	PrefillWrite PrefillMode = "write" // written from the bytes the conversion reads, checksummed as they pass
	PrefillLink  PrefillMode = "link"  // hard-linked when on the same filesystem, else copied
)

// RunOptions control how a plan is executed (not what it produces).
type RunOptions struct {
	Workers     int             // compute workers; <= 0 means GOMAXPROCS
	Readers     int             // goroutines reading the source; <= 0: one per WorkersPerReader workers
	MaxMemory   int64           // bytes of tensor data in flight (default 4 GiB)
	PrefillMode PrefillMode     // PrefillCopy (default), PrefillWrite or PrefillLink: how an FP8 source's shards reach prefill/
	Existing    Existing        // what to do with a non-empty output directory
	Backend     kernels.Backend // nil: the CPU backend
	Device      string          // recorded in the report ("cpu", or the GPU name)
	Tool        string          // tool name and version recorded in outputs
	Part        Part            // one part of a split conversion (the zero Part: all of it)
	// Progress, when set, is called with the source bytes done after each slab (from any goroutine).
	Progress func(done, total int64, tensor string)
	Events   Events // what the run kept from an earlier one, and each shard it finishes
}

// ErrNotEmpty: the output directory holds files and Existing is Refuse.
var ErrNotEmpty = errors.New("output directory is not empty")

// ErrOtherPlan: the output directory's journal was written for another source or other options.
var ErrOtherPlan = errors.New("output directory was started with other options or another source")

// ErrBadJournal: the journal of the output directory cannot be read.
var ErrBadJournal = errors.New("unreadable conversion journal")

// ErrSourceChanged: a source shard changed while it was being converted.
// It is the format package's sentinel, so a change seen while reading and one seen by the final
// check are the same error to callers.
var ErrSourceChanged = safetensors.ErrShardChanged

// WorkersPerReader is how many workers one reader goroutine serves by default. One reader moves
// about 5.5 GB/s of source from the page cache (BenchmarkReader, one core of the development
// machine) and an FP8 rtn conversion takes about 2.8 CPU ns per weight, so a reader keeps about
// fifteen workers busy; twelve leaves a margin. Up to twelve workers (this machine, CI) there is
// one reader, which reads in file order.
const WorkersPerReader = 12

// DefaultMaxMemory is the default budget of tensor bytes in flight.
const DefaultMaxMemory = 4 << 30

// runner is the state of one conversion.
type runner struct {
	plan    *Plan
	ro      RunOptions
	dir     string
	outs    []*shardSet // per output (indexed like outputKinds): nil when not written here
	journal *journal
	jmu     sync.Mutex
	results [][]slabResult
	left    []atomic.Int32 // slabs left per module
	records map[recordKey][]record
	done    atomic.Int64
	total   int64
	budget  *budget
	own     map[string]bool // a part's files (journal keys); nil: every file
	emits   [][]bool        // per module and output: whether this run computes its tensors
	factors factorCache     // GPTQ factors shared by modules reading the same input
	shared  runState        // what encodings share across modules (an expert's gate and up one scale)
	raws    rawBufs         // slab read buffers
}

// Run executes plan p into dir (dir/prefill, dir/decode, dir/report.json) and returns the report.
// With ro.Part set to a part of a split conversion it writes only that part's shards and its
// own journal, and returns the report rows of what it wrote; Merge then finishes dir.
func Run(ctx context.Context, p *Plan, dir string, ro RunOptions) (*report.Report, error) {
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
	if err := checkNotNested(dir); err != nil {
		return nil, err
	}
	if err := checkSourceLinks(p); err != nil {
		return nil, err
	}
	unlock, err := lockDir(dir, ro.Part)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := prepareDir(dir, ro); err != nil {
		return nil, err
	}
	id := p.ID()
	if !ro.Part.Whole() {
		if err := checkSiblings(dir, ro.Part, p, id); err != nil {
			return nil, err
		}
	}
	j, err := loadJournal(dir, ro.Part.journalName())
	if err != nil {
		return nil, err
	}
	if j.PlanID != "" && j.PlanID != id {
		return nil, otherPlanError(dir, "", j.Facts, p.planFacts())
	}
	j.PlanID, j.Facts = id, p.planFacts()
	if err := verifyJournal(ctx, dir, j); err != nil {
		return nil, err
	}
	if err := j.save(dir); err != nil {
		return nil, err
	}
	defer j.close()
	r, err := newRunner(p, dir, ro, j, own)
	if err != nil {
		return nil, err
	}
	ro.Events.resumed(p, j, own)
	if err := r.closeReady(); err != nil {
		return nil, err
	}
	err = r.convert(ctx)
	if err != nil {
		// Interrupted: the tensors finished in unfinished shards stay for a rerun to keep.
		keep := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		for _, set := range r.sets() {
			set.abort(keep)
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
	if ro.Readers <= 0 {
		ro.Readers = (ro.Workers + WorkersPerReader - 1) / WorkersPerReader
	}
	if ro.MaxMemory <= 0 {
		ro.MaxMemory = DefaultMaxMemory
	}
	if ro.PrefillMode == "" {
		ro.PrefillMode = PrefillCopy
	}
	if ro.PrefillMode != PrefillCopy && ro.PrefillMode != PrefillWrite && ro.PrefillMode != PrefillLink {
		return fmt.Errorf("%w: prefill mode %q (want copy, write or link)", ErrBadOptions, ro.PrefillMode)
	}
	if ro.Tool == "" {
		ro.Tool = "pdq"
	}
	if !ro.Part.Whole() {
		if err := ro.Part.check(); err != nil {
			return err
		}
		if ro.Existing == Restart {
			return fmt.Errorf("%w: a part never deletes the shared output directory (other parts write there); remove it yourself to start over", ErrBadOptions)
		}
	}
	return nil
}

// newRunner sets up the state of a run over journal j; own, when not nil, holds the journal
// keys of the files this run may write (a part's), the rest count as written by others.
func newRunner(p *Plan, dir string, ro RunOptions, j *journal, own map[string]bool) (*runner, error) {
	r := &runner{plan: p, ro: ro, dir: dir, journal: j, own: own, records: map[recordKey][]record{}, budget: newBudget(ro.MaxMemory)}
	r.outs = make([]*shardSet, len(outputKinds))
	for _, out := range p.Outputs {
		if out.CopySource {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, string(out.Kind)), 0o755); err != nil {
			return nil, fmt.Errorf("convert: %w", err)
		}
		r.outs[outputIndex(out.Kind)] = newShardSet(out, filepath.Join(dir, string(out.Kind)), j, own)
	}
	for _, fs := range j.Shards {
		for _, rec := range fs.Records {
			k := recordKey{OutputKind(rec.Row.Output), rec.Row.Tensor}
			r.records[k] = append(r.records[k], rec)
		}
	}
	for _, fs := range j.Tensors { // those newShardSet kept
		for _, rec := range fs.Records {
			k := recordKey{OutputKind(rec.Row.Output), rec.Row.Tensor}
			r.records[k] = append(r.records[k], rec)
		}
	}
	return r, nil
}

// sets returns the shard sets of the outputs this run writes.
func (r *runner) sets() []*shardSet {
	var s []*shardSet
	for _, set := range r.outs {
		if set != nil {
			s = append(s, set)
		}
	}
	return s
}

// ErrBusy: another run holds the output directory (or the same part of it).
var ErrBusy = fsutil.ErrLocked

// lockDir creates dir and takes the run lock of part pt in it (the whole conversion's for the
// zero Part): two runs of the same directory, or of the same part, never write at once.
func lockDir(dir string, pt Part) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	unlock, err := fsutil.Lock(filepath.Join(dir, pt.lockName()))
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	return unlock, nil
}

// isLockFile reports a run lock's file name.
func isLockFile(name string) bool {
	return strings.HasPrefix(name, ".pdq-journal") && strings.HasSuffix(name, ".json.lock")
}

// prepareDir creates dir or checks that it may be used. A part of a split conversion uses a
// non-empty dir (other parts write there) and never deletes anything; Restart deletes what a
// conversion writes, part journals included, and nothing else.
func prepareDir(dir string, ro RunOptions) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if !ro.Part.Whole() || !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return !isLockFile(e.Name()) }) {
		return nil // a part shares the directory; an empty one (but for run locks) is new
	}
	parts, err := partJournals(dir)
	if err != nil {
		return err
	}
	switch {
	case ro.Existing == Restart:
		names := append([]string{"prefill", "decode", "report.json", JournalName}, parts...)
		for _, name := range names {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("convert: %w", err)
			}
		}
		return nil
	case ro.Existing == Resume:
		return checkResumable(dir, ents)
	}
	if len(parts) > 0 {
		return fmt.Errorf("convert: %s: %w", dir, ErrSplitDir)
	}
	return fmt.Errorf("convert: %s: %w", dir, ErrNotEmpty)
}
