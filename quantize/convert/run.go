package convert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/safetensors"
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
	Events   Events // what the run kept from an earlier one, and each shard it finishes
}

// ErrNotEmpty: the output directory holds files and neither Resume nor Force was given.
var ErrNotEmpty = errors.New("output directory is not empty (use --resume to continue or --force to start over)")

// ErrOverlapsSource: the output directory is the source, inside it, or holds it. Refused before
// anything is created or removed, whatever Force says: cleaning such an output would delete the
// source.
var ErrOverlapsSource = errors.New("output directory overlaps the source")

// checkApart refuses an output directory that holds the source (its directory, index or a
// shard) or, for a source given as a directory, lies inside it; paths are compared absolute
// with symbolic links resolved.
func checkApart(src *safetensors.Checkpoint, dir string) error {
	out, err := resolvePath(dir)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	given := []string{src.Opened, src.IndexPath}
	for _, sh := range src.Shards {
		given = append(given, sh.Path)
	}
	dirSource := false
	if st, err := os.Stat(src.Opened); err == nil && st.IsDir() {
		dirSource = true
	}
	for i, p := range given {
		if p == "" {
			continue
		}
		sp, err := resolvePath(p)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		if within(sp, out) || i == 0 && dirSource && within(out, sp) {
			return fmt.Errorf("convert: --out %s and source %s: %w (choose an output directory outside the source that does not contain it)", dir, src.Opened, ErrOverlapsSource)
		}
	}
	return nil
}

// resolvePath returns the absolute form of p with symbolic links resolved in its longest
// existing prefix (the rest need not exist yet).
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		if cur == filepath.Dir(cur) {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// within reports whether path a is b or lies under b.
func within(a, b string) bool {
	rel, err := filepath.Rel(b, a)
	return err == nil && (rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

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
	ro.Events.resumed(p, j)
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

// verifyJournal drops journal entries whose file is missing or differs from what was recorded.
func verifyJournal(dir string, j *journal) error {
	keys := make([]string, 0, len(j.Shards))
	for k := range j.Shards {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fs := j.Shards[k]
		size, sum, err := hashFile(filepath.Join(dir, filepath.FromSlash(k)))
		if err != nil || size != fs.Size || sum != fs.SHA256 {
			slog.Warn("finished shard missing or changed; redoing it", "shard", k)
			delete(j.Shards, k)
		}
	}
	return nil
}

// ID identifies the plan: the source shards (headers, size and modification time) and the
// options. A resumed run must have the same ID: shards finished from a source that changed
// since are not kept.
func (p *Plan) ID() string {
	h := sha256.New()
	for _, s := range p.Source.Shards {
		fmt.Fprintf(h, "%s %d %d %d\n", s.Name, s.Size, s.Header.DataStart, s.ModTime.UnixNano())
	}
	b, _ := json.Marshal(p.Options)
	h.Write(b)
	if c := p.Options.Calib; c != nil {
		fmt.Fprintf(h, "calib %s\n", c.ID)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// convert streams the source through the workers.
func (r *runner) convert(ctx context.Context) error {
	p := r.plan
	r.results = make([][]slabResult, len(p.Modules))
	r.left = make([]atomic.Int32, len(p.Modules))
	var slabs []*slab
	for mi, m := range p.Modules {
		if r.moduleFinished(m) {
			continue
		}
		rows, _ := rowsOf(m)
		step := slabRows(m)
		n := 0
		for r0 := 0; r0 < rows || (rows == 0 && n == 0); r0 += step {
			slabs = append(slabs, &slab{mi: mi, si: n, r0: r0, r1: min(rows, r0+step)})
			n++
			if rows == 0 {
				break
			}
		}
		r.results[mi] = make([]slabResult, n)
		r.left[mi].Store(int32(n))
		r.total += m.Weight.ByteSize() // what slabDone counts: weight rows, not scale companions
		r.factors.plan(m)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *slab, r.ro.Workers)
	var wg sync.WaitGroup
	for range r.ro.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{r: r, backend: r.ro.Backend}
			for s := range work {
				err := wk.process(ctx, s)
				s.raw, s.scaleRaw = nil, nil
				if err == nil {
					err = r.slabDone(s)
				}
				r.budget.release(s.cost)
				if err != nil {
					cancel(err)
				}
			}
		}()
	}
	err := r.read(ctx, slabs, work)
	close(work)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// read is the single reader: it reads slabs in file order within the memory budget.
func (r *runner) read(ctx context.Context, slabs []*slab, work chan<- *slab) error {
	src := r.plan.Source
	for _, s := range slabs {
		m := r.plan.Modules[s.mi]
		_, rowBytes := rowsOf(m)
		n := int64(s.r1-s.r0) * rowBytes
		if m.Weight.ByteSize() == 0 {
			n = 0
		}
		elems := int64(s.r1-s.r0) * int64(max(m.Cols, 1))
		s.cost = 2*n + 16*elems + gptqWorkBytes(m)
		if err := r.budget.acquire(ctx, s.cost); err != nil {
			return err
		}
		s.raw = make([]byte, n)
		if err := src.ReadTensorAt(m.Weight, s.raw, int64(s.r0)*rowBytes); err != nil {
			r.budget.release(s.cost)
			return fmt.Errorf("convert: read %s: %w", m.describe(), err)
		}
		if m.Scale != nil {
			sr0, sr1 := scaleRange(m, s.r0, s.r1)
			srow := m.Scale.ByteSize() / max(m.Scale.Shape[0], 1)
			s.scaleRaw = make([]byte, (sr1-sr0)*srow)
			if err := src.ReadTensorAt(m.Scale, s.scaleRaw, sr0*srow); err != nil {
				r.budget.release(s.cost)
				return fmt.Errorf("convert: read %s: %w", m.describe(), err)
			}
		}
		select {
		case work <- s:
		case <-ctx.Done():
			r.budget.release(s.cost)
			return ctx.Err()
		}
	}
	return nil
}

// moduleFinished reports whether every output tensor of m is in a shard finished by an earlier run.
func (r *runner) moduleFinished(m *Module) bool {
	for _, set := range []*shardSet{r.prefill, r.decode} {
		if set == nil {
			continue
		}
		for _, spec := range r.plan.OutputSpecs(m, set.out.Kind) {
			if !set.finished(spec.Name) {
				return false
			}
		}
	}
	return true
}

// slabDone records progress and, after a module's last slab, its report rows and shard completions.
func (r *runner) slabDone(s *slab) error {
	m := r.plan.Modules[s.mi]
	_, rowBytes := rowsOf(m)
	done := r.done.Add(int64(s.r1-s.r0) * rowBytes)
	if r.ro.Progress != nil {
		r.ro.Progress(done, r.total, m.Weight.Name)
	}
	if r.left[s.mi].Add(-1) != 0 {
		return nil
	}
	r.moduleRecords(s.mi)
	for _, set := range []*shardSet{r.prefill, r.decode} {
		if set == nil {
			continue
		}
		for _, spec := range r.plan.OutputSpecs(m, set.out.Kind) {
			i, err := set.complete(spec.Name)
			if err != nil {
				return err
			}
			if i >= 0 {
				if err := r.journalShard(set, i); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// moduleRecords merges a finished module's slab metrics (in slab order) into report records.
func (r *runner) moduleRecords(mi int) {
	m := r.plan.Modules[mi]
	res := r.results[mi]
	add := func(kind string, scheme Scheme, tensor string, pick func(*slabResult) *quantize.Metrics, rtn bool) {
		var total, rtnTotal quantize.Metrics
		for i := range res {
			total.Merge(*pick(&res[i]))
			if rtn {
				rtnTotal.Merge(res[i].rtn)
			}
		}
		row := newTensorReport(kind, m, tensor, scheme, total)
		rec := record{Row: row, M: total}
		if rtn {
			v := Float(rtnTotal.SQNR())
			rec.Row.RTNSQNR, rec.RTN = &v, &rtnTotal
			rec.Row.GroupSize, rec.Row.Method = r.plan.Options.GroupSize, string(r.plan.Options.Method)
			rec.Row.setCalib(m.Calib, res)
		}
		r.jmu.Lock()
		r.records[kind+"\x00"+tensor] = []record{rec}
		r.jmu.Unlock()
	}
	if r.prefill != nil && m.Prefill == SchemeFP8Block {
		add("prefill", m.Prefill, m.Name+".weight", func(x *slabResult) *quantize.Metrics { return &x.prefill }, false)
	}
	if r.decode != nil {
		switch m.Decode {
		case SchemeInt4:
			add("decode", m.Decode, m.Name+".weight_packed", func(x *slabResult) *quantize.Metrics { return &x.decode }, true)
		case SchemeFP8Block, SchemeBF16:
			add("decode", m.Decode, m.Name+".weight", func(x *slabResult) *quantize.Metrics { return &x.decode }, false)
		}
	}
	r.results[mi] = nil
}

// journalShard hashes a finished shard and records it with the report rows of its tensors.
func (r *runner) journalShard(set *shardSet, i int) error {
	key := set.key(i)
	size, sum, err := hashFile(filepath.Join(set.dir, set.out.Shards[i].FileName))
	if err != nil {
		return err
	}
	fs := &finishedShard{Size: size, SHA256: sum}
	r.jmu.Lock()
	defer r.jmu.Unlock()
	for _, spec := range set.out.Shards[i].Specs {
		fs.Records = append(fs.Records, r.records[set.out.Kind+"\x00"+spec.Name]...)
	}
	if err := r.journal.add(r.dir, key, fs); err != nil {
		return err
	}
	r.ro.Events.shardDone(set.out.Kind, set.out.Shards[i].FileName, size)
	return nil
}

// copySource copies or links an FP8 source's shards into prefill/ unchanged. It runs beside the
// conversion (the disk is idle while the CPU quantizes) and hashes while it copies, so each byte
// is read once.
func (r *runner) copySource(ctx context.Context) error {
	dst := filepath.Join(r.dir, "prefill")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for _, s := range r.plan.Source.Shards {
		key := "prefill/" + s.Name
		r.jmu.Lock()
		_, done := r.journal.Shards[key]
		r.jmu.Unlock()
		if done {
			continue
		}
		size, sum, err := copyHashed(ctx, s.Path, filepath.Join(dst, s.Name), r.ro.PrefillMode == "link")
		if err != nil {
			return err
		}
		r.jmu.Lock()
		err = r.journal.add(r.dir, key, &finishedShard{Size: size, SHA256: sum})
		r.jmu.Unlock()
		if err != nil {
			return err
		}
		r.ro.Events.shardDone("prefill", s.Name, size)
	}
	return nil
}

// copyHashed makes dst a copy of src under a temporary name, hashing the bytes as they pass, and
// renames it when complete; with link set it tries a hard link first (same filesystem), then
// hashes the linked file. The copy stops at the next 8 MiB chunk when ctx is cancelled.
func copyHashed(ctx context.Context, src, dst string, link bool) (int64, string, error) {
	if link {
		tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".partial")
		os.Remove(tmp)
		target := src
		if t, err := filepath.EvalSymlinks(src); err == nil {
			target = t // link the file itself: a hard link to a relative symbolic link dangles here
		}
		if err := os.Link(target, tmp); err == nil {
			if err := os.Rename(tmp, dst); err != nil {
				os.Remove(tmp)
				return 0, "", fmt.Errorf("convert: link %s: %w", src, err)
			}
			return hashFile(dst)
		}
		slog.Info("hard link not possible; copying", "src", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, "", fmt.Errorf("convert: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	var n int64
	err = writeAtomic(dst, func(w io.Writer) error {
		buf := make([]byte, 8<<20)
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			k, rerr := io.ReadFull(in, buf)
			if k > 0 {
				h.Write(buf[:k])
				if _, err := w.Write(buf[:k]); err != nil {
					return err
				}
				n += int64(k)
			}
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				return nil
			}
			if rerr != nil {
				return rerr
			}
		}
	})
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile makes dst a copy of src (temporary name, then rename).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer in.Close()
	return writeAtomic(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// checkSourceUnchanged compares each source shard's size and modification time with what Open saw.
func checkSourceUnchanged(src *safetensors.Checkpoint) error {
	for _, s := range src.Shards {
		fi, err := os.Stat(s.Path)
		if err != nil {
			return fmt.Errorf("convert: %s: %w: %v", s.Name, ErrSourceChanged, err)
		}
		if fi.Size() != s.Size || !fi.ModTime().Equal(s.ModTime) {
			return fmt.Errorf("convert: %s: %w (size or modification time differs)", s.Name, ErrSourceChanged)
		}
	}
	return nil
}

// finish writes the indexes, configs, side files and the report: the last steps, so that a
// directory without them is recognisably unfinished.
func (r *runner) finish() (*Report, error) {
	p := r.plan
	for _, set := range []*shardSet{r.prefill, r.decode} {
		if set != nil && !set.allDone() {
			return nil, fmt.Errorf("convert: internal: %s has unfinished shards", set.out.Kind)
		}
	}
	extra := map[string]any{"producer": r.ro.Tool}
	for _, out := range []*Output{p.Prefill, p.Decode} {
		if out == nil {
			continue
		}
		dir := filepath.Join(r.dir, out.Kind)
		// Side files, then config.json, then the index: an output with an index is complete.
		if err := copySideFiles(p.Source.Dir, dir); err != nil {
			return nil, err
		}
		if out.CopySource {
			if err := copyFile(filepath.Join(p.Source.Dir, "config.json"), filepath.Join(dir, "config.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		} else if out.Config != nil {
			b, err := json.MarshalIndent(out.Config, "", "  ")
			if err != nil {
				return nil, err
			}
			if err := writeFileAtomic(filepath.Join(dir, "config.json"), append(b, '\n')); err != nil {
				return nil, err
			}
		}
		if out.CopySource {
			if p.Source.IndexPath != "" {
				if err := copyFile(p.Source.IndexPath, filepath.Join(dir, safetensors.IndexFileName)); err != nil {
					return nil, err
				}
			}
		} else if err := safetensors.WriteIndex(dir, out.Shards, extra); err != nil {
			return nil, err
		}
	}
	rep := r.report()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(r.dir, "report.json"), append(b, '\n')); err != nil {
		return nil, err
	}
	return rep, nil
}

// report assembles report.json from the records, in plan order.
func (r *runner) report() *Report {
	p := r.plan
	rep := &Report{
		Tool: r.ro.Tool, Source: p.Source.Dir, SourceLayout: p.Layout, Device: r.ro.Device,
		InputBytes: p.InputBytes(), Skipped: p.Skipped, Warnings: p.Warnings,
		Options: ReportOptions{GroupSize: p.Options.GroupSize, Method: string(p.Options.Method), SignedScales: p.Options.SignedScales,
			Targets: p.Options.Targets, Ignore: p.Options.Ignore, DecodeDense: p.Options.DecodeDense, Only: p.Options.Only,
			MaxShardSize: p.Options.MaxShardSize},
	}
	if p.Prefill != nil {
		rep.PrefillBytes = p.Prefill.Bytes(p.Source)
	}
	if p.Decode != nil {
		rep.DecodeBytes = p.Decode.Bytes(p.Source)
	}
	sums := map[[3]string]*roleAcc{}
	for _, kind := range []string{"prefill", "decode"} {
		for _, m := range p.Modules {
			var tensor string
			switch s := m.Decode; {
			case kind == "prefill" && m.Prefill == SchemeFP8Block:
				tensor = m.Name + ".weight"
			case kind == "decode" && s == SchemeInt4:
				tensor = m.Name + ".weight_packed"
			case kind == "decode" && (s == SchemeFP8Block || s == SchemeBF16):
				tensor = m.Name + ".weight"
			}
			recs := r.records[kind+"\x00"+tensor]
			if tensor == "" || len(recs) == 0 {
				continue
			}
			rec := recs[0]
			rep.Tensors = append(rep.Tensors, rec.Row)
			k := [3]string{kind, rec.Row.Role, rec.Row.Scheme}
			if sums[k] == nil {
				sums[k] = &roleAcc{}
			}
			sums[k].add(rec.Row, rec.M, rec.RTN)
		}
	}
	rep.finish(sums)
	rep.Calibration = calibReport(p, rep.Tensors)
	return rep
}

// InputBytes is the total size of the source's shard files.
func (p *Plan) InputBytes() int64 {
	var n int64
	for _, s := range p.Source.Shards {
		n += s.Size
	}
	return n
}

// copySideFiles copies every regular file of the source directory that is not a weight shard, the
// index or config.json (tokenizer files, generation_config.json, chat templates, *.py, LICENSE,
// README) into dst.
func copySideFiles(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		regular := e.Type().IsRegular()
		if e.Type()&os.ModeSymlink != 0 { // a Hugging Face cache snapshot links to its blobs
			fi, err := os.Stat(filepath.Join(src, name))
			regular = err == nil && fi.Mode().IsRegular()
		}
		if !regular || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".safetensors") ||
			name == safetensors.IndexFileName || name == "config.json" {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

// budget bounds the bytes in flight.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	used  int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n bytes fit (a single request larger than the limit runs alone).
func (b *budget) acquire(ctx context.Context, n int64) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+n > b.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err // nothing acquired: the caller releases nothing
	}
	b.used += n
	return nil
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}
