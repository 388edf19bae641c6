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
	// Progress, when set, is called with the source bytes done after each slab (from any goroutine).
	Progress func(done, total int64, tensor string)
}

// ErrNotEmpty: the output directory holds files and neither Resume nor Force was given.
var ErrNotEmpty = errors.New("output directory is not empty (use --resume to continue or --force to start over)")

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
	factors         factorCache // GPTQ factors shared by modules reading the same input
}

// Run executes plan p into dir (dir/prefill, dir/decode, dir/report.json) and returns the report.
func Run(ctx context.Context, p *Plan, dir string, ro RunOptions) (*Report, error) {
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
		return nil, fmt.Errorf("%w: prefill mode %q (want copy or link)", ErrBadOptions, ro.PrefillMode)
	}
	if ro.Tool == "" {
		ro.Tool = "pdq"
	}
	if err := checkApart(p.Source, dir); err != nil {
		return nil, err
	}
	if err := prepareDir(dir, ro); err != nil {
		return nil, err
	}
	j, err := loadJournal(dir)
	if err != nil {
		return nil, err
	}
	id := p.ID()
	if j.PlanID != "" && j.PlanID != id {
		return nil, fmt.Errorf("convert: %s was started with other options or another source (use --force to start over)", dir)
	}
	j.PlanID = id
	if err := verifyJournal(dir, j); err != nil {
		return nil, err
	}
	if err := j.save(dir); err != nil {
		return nil, err
	}
	r := &runner{plan: p, ro: ro, dir: dir, journal: j, records: map[string][]record{}, budget: newBudget(ro.MaxMemory)}
	for _, out := range []*Output{p.Prefill, p.Decode} {
		if out == nil || out.CopySource {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, out.Kind), 0o755); err != nil {
			return nil, fmt.Errorf("convert: %w", err)
		}
		set := newShardSet(out, filepath.Join(dir, out.Kind), j)
		if out.Kind == "prefill" {
			r.prefill = set
		} else {
			r.decode = set
		}
	}
	for _, fs := range j.Shards {
		for _, rec := range fs.Records {
			r.records[rec.Row.Output+"\x00"+rec.Row.Tensor] = append(r.records[rec.Row.Output+"\x00"+rec.Row.Tensor], rec)
		}
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
		if r.prefill != nil {
			r.prefill.abort()
		}
		if r.decode != nil {
			r.decode.abort()
		}
		return nil, err
	}
	if err := checkSourceUnchanged(p.Source); err != nil {
		return nil, err
	}
	return r.finish()
}

// prepareDir creates dir or checks that it may be used.
func prepareDir(dir string, ro RunOptions) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if len(ents) == 0 {
		return nil
	}
	switch {
	case ro.Force:
		for _, name := range []string{"prefill", "decode", "report.json", JournalName} {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("convert: %w", err)
			}
		}
		return nil
	case ro.Resume:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, JournalName)); err == nil {
		return fmt.Errorf("convert: %s: %w", dir, ErrNotEmpty)
	}
	return fmt.Errorf("convert: %s: %w", dir, ErrNotEmpty)
}
