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
// .parts log of an earlier run lists. It returns ranges fetched, ranges reused and bytes fetched.
func (p *puller) download(ctx context.Context, f File, obj string) (int, int, int64, error) {
	if err := p.root.MkdirAll(path.Dir(obj), 0o755); err != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	logName := obj + ".parts"
	done := p.readPartsLog(logName)
	out, err := p.root.OpenFile(obj, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	defer out.Close()
	if err := out.Truncate(f.StoredSize); err != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	flag := os.O_WRONLY | os.O_APPEND
	if done == nil {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	logf, err := p.root.OpenFile(logName, flag, 0o644)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("publish: %w", err)
	}
	defer logf.Close()
	if done == nil {
		fmt.Fprintf(logf, "partsize %d\n", p.partSize)
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
		wg              sync.WaitGroup
		mu              sync.Mutex
		firstErr        error
		fetched, reused int
		bytes           int64
	)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		off := int64(i) * p.partSize
		ln := min(p.partSize, f.StoredSize-off)
		if done[i] {
			reused++
			p.progress.Add(ln)
			continue
		}
		select {
		case p.sem <- struct{}{}:
		case <-pctx.Done():
		}
		if pctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-p.sem }()
			err := p.fetchRange(pctx, f.Key, out, off, ln)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			fetched++
			bytes += ln
			fmt.Fprintf(logf, "%d\n", i)
			if p.onRange != nil {
				p.onRange(f.Key, i)
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return fetched, reused, bytes, firstErr
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

// readPartsLog returns the ranges an earlier run finished, or nil when there is no usable log.
func (p *puller) readPartsLog(name string) map[int]bool {
	b, err := p.root.ReadFile(name)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	if lines[0] != "partsize "+strconv.FormatInt(p.partSize, 10) {
		return nil
	}
	done := map[int]bool{}
	for _, l := range lines[1:] {
		if i, err := strconv.Atoi(l); err == nil && i >= 0 {
			done[i] = true
		}
	}
	return done
}
