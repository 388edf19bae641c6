package convert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"pdq/internal/fsutil"
	"pdq/safetensors"
)

// An FP8 source's shards reach prefill/ unchanged. Where the output's file system clones files
// (XFS, btrfs: the copy shares the source's blocks until either is written, as cp --reflink
// does), each copy is a clone made when its first slab arrives, which writes nothing and takes no
// space; elsewhere, and always with PrefillWrite, it is written. Either way it is made from the
// bytes the reader already reads for the conversion, so each source byte is read once (from the
// disk, and into memory): the copier hands every slab the reader gives it to the copy of its
// shard, at the slab's file offset, and then reads the few bytes no slab covers (the header,
// tensors no module reads such as input_scale, padding). A written copy writes them; a clone
// takes their checksums only. A copy is complete when the last of its slabs is in; it is then
// checked (fsutil.PieceFile: every byte covered once, the CRC-32C combined from the pieces),
// renamed into place and journaled. A clone's checksum is that of the bytes read, which are its
// own as long as nothing wrote to the shard since Open read its header: its size, modification
// and status-change times are checked once the clone is made and again before it is committed
// (sourceIntact), so a write dated back fails the run too. A written copy needs no such check:
// it holds the bytes read.
// With PrefillLink a shard is hard-linked first where the file system allows, and copied where
// it does not.

// sourceCopy is the prefill copy of one source shard this run writes.
type sourceCopy struct {
	shard  *safetensors.Shard
	key    string            // journal key, "prefill/NAME"
	path   string            // the copy's path
	pf     *fsutil.PieceFile // created (or cloned) on the first piece
	pieces int               // slab pieces still to come from the reader
	done   bool              // committed and journaled
}

// copier writes the prefill copies of the source shards from the slabs the reader reads.
type copier struct {
	r       *runner
	copies  map[*safetensors.Shard]*sourceCopy // fixed once the copier runs (the reader looks up in it)
	order   []*sourceCopy                      // source order
	in      chan *slab
	err     error     // the first error (the copier's own, or ctx's)
	refused sync.Once // logs that the file system makes no clones, once
}

// gapChunk is the size of the copier's reads of what no slab covers.
const gapChunk = 1 << 20

// copyQueue is how many slabs may wait for the copier: enough to smooth the device's pace, few
// enough that a copier slower than the conversion (a slow disk) holds the reader back instead of
// having it read slab after slab into fresh buffers up to the memory budget (a 1 GiB FP8 run on a
// busy disk faulted in 300 MB of new buffers with room for 256; 150 MB with 8, of which the
// workers' own are most).
const copyQueue = 8

// newCopier returns the copier of the source shards this run still copies, after hard-linking
// those it can with PrefillLink; nil when there are none.
func (r *runner) newCopier(ctx context.Context) (*copier, error) {
	p := r.plan
	if pre := p.Output(KindPrefill); pre == nil || !pre.CopySource {
		return nil, nil
	}
	dst := filepath.Join(r.dir, "prefill")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	c := &copier{r: r, copies: map[*safetensors.Shard]*sourceCopy{}, in: make(chan *slab, copyQueue)}
	for _, s := range p.Source.Shards {
		key := "prefill/" + s.Name
		if r.own != nil && !r.own[key] {
			continue // another part's
		}
		r.jmu.Lock()
		_, done := r.journal.Shards[key]
		r.jmu.Unlock()
		if done {
			continue
		}
		if r.ro.PrefillMode == PrefillLink {
			linked, err := linkShard(ctx, s.Path, filepath.Join(dst, s.Name))
			if err != nil {
				return nil, err
			}
			if linked != nil {
				if err := r.copyDone(key, s.Name, linked.size, linked.crc, false); err != nil {
					return nil, err
				}
				continue
			}
		}
		sc := &sourceCopy{shard: s, key: key, path: filepath.Join(dst, s.Name)}
		c.copies[s] = sc
		c.order = append(c.order, sc)
	}
	if len(c.order) == 0 {
		return nil, nil
	}
	return c, nil
}

// copyDone journals a finished copy and reports it.
func (r *runner) copyDone(key, name string, size int64, crc uint32, cloned bool) error {
	r.jmu.Lock()
	err := r.journal.add(r.dir, key, &finishedShard{Size: size, CRC32C: &crc})
	r.jmu.Unlock()
	if err != nil {
		return err
	}
	r.ro.Events.shardDone(KindPrefill, name, size, cloned)
	return nil
}

// wants reports whether the copier takes module m's bytes (its weight's or its scale's shard
// is copied by this run).
func (c *copier) wants(m *Module) bool {
	if c == nil {
		return false
	}
	return c.copies[m.Weight.Shard] != nil || m.Scale != nil && c.copies[m.Scale.Shard] != nil
}

// count records the pieces slab s will hand the copier, so that each copy knows its last one.
func (c *copier) count(m *Module, s *slab) {
	if sc := c.copies[m.Weight.Shard]; sc != nil && s.wLen > 0 {
		sc.pieces++
	}
	if m.Scale != nil {
		if sc := c.copies[m.Scale.Shard]; sc != nil && s.sLen > 0 {
			sc.pieces++
		}
	}
}

// run writes the slabs that arrive, finishing each copy after its last piece, until in is
// closed; copies with no pieces at all are made first, from the source. Each slab is released
// once written. On an error it cancels the run and drains in.
func (c *copier) run(ctx context.Context, cancel context.CancelCauseFunc) {
	fail := func(err error) {
		if c.err == nil {
			c.err = err
			cancel(err)
		}
	}
	for _, sc := range c.order {
		if sc.pieces == 0 && c.err == nil {
			if err := c.finish(ctx, sc); err != nil {
				fail(err)
			}
		}
	}
	for s := range c.in {
		if c.err == nil {
			if err := c.write(ctx, s); err != nil {
				fail(err)
			}
		}
		c.r.release(s)
	}
}

// write puts slab s's weight and scale bytes into the copies of their shards.
func (c *copier) write(ctx context.Context, s *slab) error {
	m := c.r.plan.Modules[s.mi]
	if err := c.put(ctx, m.Weight, s.wOff, s.raw, s.rawCRC); err != nil {
		return err
	}
	if m.Scale != nil {
		return c.put(ctx, m.Scale, s.sOff, s.scaleRaw, s.scaleCRC)
	}
	return nil
}

// put writes the bytes b of tensor t, off bytes into it, whose CRC-32C is crc, into the copy of
// t's shard.
func (c *copier) put(ctx context.Context, t *safetensors.Tensor, off int64, b []byte, crc uint32) error {
	sc := c.copies[t.Shard]
	if sc == nil || len(b) == 0 {
		return nil
	}
	if err := c.open(sc); err != nil {
		return err
	}
	if err := sc.pf.WriteAtSum(b, t.Offset()+off, crc); err != nil {
		return fmt.Errorf("convert: prefill copy of %s: %w", t.Shard.Name, err)
	}
	if sc.pieces--; sc.pieces == 0 {
		return c.finish(ctx, sc)
	}
	return nil
}

// open creates the temporary file of the copy on its first piece: a clone of the source shard
// where the file system makes one, else a file to write.
func (c *copier) open(sc *sourceCopy) error {
	if sc.pf != nil {
		return nil
	}
	if c.r.ro.PrefillMode != PrefillWrite {
		pf, err := c.clone(sc)
		if err != nil {
			return err
		}
		if pf != nil {
			sc.pf = pf
			return nil
		}
	}
	pf, err := fsutil.CreatePieces(sc.path, 0o644, sc.shard.Size)
	if err != nil {
		return fmt.Errorf("convert: prefill copy of %s: %w", sc.shard.Name, err)
	}
	sc.pf = pf
	return nil
}

// clone makes the copy sc a clone of its source shard, or returns nil without an error where the
// file system makes none.
func (c *copier) clone(sc *sourceCopy) (*fsutil.PieceFile, error) {
	f, err := c.r.plan.Source.ShardFile(sc.shard)
	if err != nil {
		return nil, fmt.Errorf("convert: prefill copy: %w", err)
	}
	pf, err := fsutil.ClonePieces(sc.path, 0o644, f, sc.shard.Size)
	switch {
	case errors.Is(err, fsutil.ErrNotCloned):
		c.refused.Do(func() {
			slog.Debug("prefill copies are written: the output's file system makes no clone of the source's files", "reason", err)
		})
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("convert: prefill copy of %s: %w", sc.shard.Name, err)
	}
	if err := sourceIntact(f, sc.shard); err != nil { // written since Open, or while it was cloned
		pf.Abort()
		return nil, err
	}
	slog.Debug("prefill copy is a clone", "shard", sc.shard.Name)
	return pf, nil
}

// sourceIntact checks that source shard s, open as f, is as Open found it: size, modification
// time and status-change time. A clone holds the bytes the shard has when the clone is made,
// and its checksum is that of the bytes the run reads, so both must be the bytes Open saw. A
// change of the status-change time alone (a hard link made to the shard, a chmod) fails too: it
// cannot be told from a write whose modification time was set back.
func sourceIntact(f *os.File, s *safetensors.Shard) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if st.Size() != s.Size || !st.ModTime().Equal(s.ModTime) || !fsutil.ChangeTime(st).Equal(s.Changed) {
		return fmt.Errorf("convert: %s: %w (size, modification or status-change time; a cloned prefill copy needs it untouched until the clone is complete)", s.Name, ErrSourceChanged)
	}
	return nil
}

// finish fills what no slab covered from the source, then commits and journals the copy.
func (c *copier) finish(ctx context.Context, sc *sourceCopy) error {
	if err := c.open(sc); err != nil {
		return err
	}
	raw := make([]byte, gapChunk+fsutil.DirectAlign)
	for _, g := range sc.pf.Gaps() {
		for off := g.Lo; off < g.Hi; {
			if err := ctx.Err(); err != nil {
				return err
			}
			// Aligned like its offset, as the slab buffers are: the middle goes out directly.
			b := fsutil.AlignedLike(raw, off, int(min(gapChunk, g.Hi-off)))
			if err := c.r.plan.Source.ReadShardAt(sc.shard, b, off); err != nil {
				return fmt.Errorf("convert: prefill copy: %w", err)
			}
			if err := sc.pf.WriteAt(b, off); err != nil {
				return fmt.Errorf("convert: prefill copy of %s: %w", sc.shard.Name, err)
			}
			off += int64(len(b))
		}
	}
	if sc.pf.Cloned() { // the bytes read were the clone's: nothing wrote to the shard meanwhile
		f, err := c.r.plan.Source.ShardFile(sc.shard)
		if err == nil {
			err = sourceIntact(f, sc.shard)
		}
		if err != nil {
			sc.pf.Abort()
			return err
		}
	}
	crc, err := sc.pf.Commit()
	if err != nil {
		return fmt.Errorf("convert: prefill copy of %s: %w", sc.shard.Name, err)
	}
	sc.done = true
	return c.r.copyDone(sc.key, sc.shard.Name, sc.shard.Size, crc, sc.pf.Cloned())
}

// abort removes the temporary files of the copies not finished.
func (c *copier) abort() {
	if c == nil {
		return
	}
	for _, sc := range c.order {
		if sc.pf != nil {
			sc.pf.Abort() // a no-op for a committed one
		}
	}
}

// unfinished counts the copies not committed.
func (c *copier) unfinished() int {
	n := 0
	for _, sc := range c.order {
		if !sc.done {
			n++
		}
	}
	return n
}

// linked is a shard hard-linked into place, with the size and CRC-32C of the file.
type linked struct {
	size int64
	crc  uint32
}

// linkShard hard-links src to dst (same file system) and checksums the linked file; it returns
// nil without an error when no link is possible (the shard is then copied).
func linkShard(ctx context.Context, src, dst string) (*linked, error) {
	tmp := fsutil.PartialName(dst)
	os.Remove(tmp)
	target := src
	if t, err := filepath.EvalSymlinks(src); err == nil {
		target = t // link the file itself: a hard link to a relative symbolic link dangles here
	}
	if err := os.Link(target, tmp); err != nil {
		slog.Info("hard link not possible; copying", "src", src)
		return nil, nil
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("convert: link %s: %w", src, err)
	}
	size, crc, err := crcFile(ctx, dst)
	if err != nil {
		return nil, err
	}
	return &linked{size, crc}, nil
}
