package publish

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
)

// download fetches the object of f into obj, range by range, skipping the ranges that the
// .parts log of an earlier run lists, and returns the file, open, with the ranges fetched, ranges
// reused and bytes fetched. The files of an earlier run are used only if they are pull's own
// (openOwn); otherwise both are made afresh.
func (p *puller) download(ctx context.Context, f File, obj string) (*os.File, int, int, int64, error) {
	if err := p.root.MkdirAll(path.Dir(obj), 0o755); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	out, logf, done, err := p.openState(obj, obj+".parts")
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	defer logf.Close()
	fetched, reused, n, err := p.fetchAll(ctx, f, out, logf, done)
	if err != nil {
		out.Close()
		return nil, fetched, reused, n, err
	}
	return out, fetched, reused, n, nil
}

// openState opens the working object and its parts log of an earlier run when both are pull's
// own and the log is for this part size, or creates both anew (done is then nil).
func (p *puller) openState(obj, logName string) (out, logf *os.File, done map[int]bool, err error) {
	header := "partsize " + strconv.FormatInt(p.partSize, 10) + "\n"
	if logf, err = openOwn(p.root, logName, os.O_RDWR|os.O_APPEND); err == nil {
		b, rerr := io.ReadAll(io.LimitReader(logf, 16<<20))
		if rerr == nil && strings.HasPrefix(string(b), header) {
			if out, err = openOwn(p.root, obj, os.O_RDWR); err == nil {
				return out, logf, parseParts(string(b[len(header):])), nil
			}
		}
		logf.Close()
	}
	if out, err = createFresh(p.root, obj, os.O_RDWR); err != nil {
		return nil, nil, nil, err
	}
	if logf, err = createFresh(p.root, logName, os.O_WRONLY|os.O_APPEND); err == nil {
		_, err = logf.WriteString(header)
	}
	if err != nil {
		out.Close()
		if logf != nil {
			logf.Close()
		}
		return nil, nil, nil, err
	}
	return out, logf, nil, nil
}

// fetchAll writes the ranges of f not in done into out, logging each finished range in logf.
func (p *puller) fetchAll(ctx context.Context, f File, out, logf *os.File, done map[int]bool) (int, int, int64, error) {
	if err := out.Truncate(f.StoredSize); err != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	if f.StoredSize == 0 { // still ask, so that a missing object is noticed
		rc, err := p.st.GetRange(ctx, f.Key, 0, 0)
		if err != nil {
			return 0, 0, 0, err
		}
		rc.Close()
		return 0, 0, 0, nil
	}
	n := int((f.StoredSize + p.partSize - 1) / p.partSize)
	var (
		mu              sync.Mutex
		todo            []int
		fetched, reused int
		bytes           int64
	)
	rangeLen := func(i int) int64 { return min(p.partSize, f.StoredSize-int64(i)*p.partSize) }
	for i := range n {
		if done[i] {
			reused++
			p.progress.Add(rangeLen(i))
			continue
		}
		todo = append(todo, i)
	}
	err := forEach(ctx, len(todo), p.parallel, func(ctx context.Context, k int) error {
		i := todo[k]
		off, ln := int64(i)*p.partSize, rangeLen(i)
		if err := p.fetchRange(ctx, f.Key, out, off, ln); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		fetched++
		bytes += ln
		fmt.Fprintf(logf, "%d\n", i)
		if p.onRange != nil {
			p.onRange(f.Key, i)
		}
		return nil
	})
	if err != nil {
		return fetched, reused, bytes, err
	}
	if err := out.Sync(); err != nil {
		return fetched, reused, bytes, fmt.Errorf("publish: %w", err)
	}
	return fetched, reused, bytes, nil
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (p *puller) fetchRange(ctx context.Context, key string, out *os.File, off, n int64) error {
	rc, err := p.st.GetRange(ctx, key, off, n)
	if err != nil {
		return err
	}
	defer rc.Close()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	w := &progressWriter{w: io.NewOffsetWriter(out, off), p: p.progress}
	got, err := io.CopyBuffer(w, io.LimitReader(rc, n), *bp)
	if err != nil {
		return fmt.Errorf("publish: fetch %s/%s bytes %d..%d: %w", p.st, key, off, off+n, err)
	}
	if got != n {
		return fmt.Errorf("%w: %s/%s is shorter than the manifest says (%d bytes at %d, wanted %d)", ErrCorrupt, p.st, key, got, off, n)
	}
	return nil
}

// progressWriter reports bytes as they are written.
type progressWriter struct {
	w io.Writer
	p Progress
}

// Write implements io.Writer.
func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.Add(int64(n))
	return n, err
}

// parseParts reads the range numbers of a parts log (after its header line).
func parseParts(log string) map[int]bool {
	done := map[int]bool{}
	for l := range strings.SplitSeq(log, "\n") {
		if i, err := strconv.Atoi(l); err == nil && i >= 0 {
			done[i] = true
		}
	}
	return done
}
