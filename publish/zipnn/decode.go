package zipnn

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"

	"pdq/internal/par"
)

// readTable reads and checks the header and table from r, growing its buffer as bytes arrive
// rather than trusting the chunk count.
func readTable(r io.Reader) (header, []entry, error) {
	hb := make([]byte, headerSize)
	if _, err := io.ReadFull(r, hb); err != nil {
		return header{}, nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	h, err := parseHeader(hb)
	if err != nil {
		return header{}, nil, err
	}
	need := h.dataOffset() - headerSize
	buf := hb
	for need > 0 {
		step := min(need, 1<<20)
		buf = append(buf, make([]byte, step)...)
		if _, err := io.ReadFull(r, buf[len(buf)-int(step):]); err != nil {
			return header{}, nil, fmt.Errorf("%w: table: %v", ErrFormat, err)
		}
		need -= step
	}
	es, err := parseTable(h, buf)
	return h, es, err
}

// Decompress reads a container from src and writes the original bytes to dst, in order, decoding
// chunks on several workers; every chunk is checked against its CRC32C. It returns the number of
// bytes written. src is read sequentially, so it may be a network stream. Each chunk decodes
// into a buffer of exactly its table length, and the table's lengths add up to the header's raw
// size, so with opts.CheckSize nothing past opts.Size is ever written.
func Decompress(ctx context.Context, dst io.Writer, src io.Reader, opts Options) (int64, error) {
	h, es, err := readTable(src)
	if err != nil {
		return 0, err
	}
	if opts.CheckSize && h.rawSize != opts.Size {
		return 0, fmt.Errorf("%w: container holds %d bytes, expected %d", ErrFormat, h.rawSize, opts.Size)
	}
	workers := opts.workers()
	type job struct{ payload, raw []byte }
	batch := make([]job, 4*workers)
	coders := make(chan *coder, workers)
	for range workers {
		coders <- newCoder()
	}
	var written int64
	for first := 0; first < len(es); first += len(batch) {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		n := min(len(batch), len(es)-first)
		for i := range n {
			e, j := es[first+i], &batch[i]
			if cap(j.payload) < int(e.storedLen) {
				j.payload = make([]byte, maxStored)
			}
			j.payload = j.payload[:e.storedLen]
			if _, err := io.ReadFull(src, j.payload); err != nil {
				return written, fmt.Errorf("%w: chunk %d: %v", ErrFormat, first+i, err)
			}
		}
		err := par.ForEach(ctx, n, workers, func(i int) error {
			e, j := es[first+i], &batch[i]
			c := <-coders
			defer func() { coders <- c }()
			if cap(j.raw) < MaxChunk {
				j.raw = make([]byte, MaxChunk)
			}
			j.raw = j.raw[:e.rawLen]
			return decodeChunk(c, j.raw, j.payload, e, first+i)
		})
		if err != nil {
			return written, err
		}
		for i := range n {
			m, err := dst.Write(batch[i].raw)
			written += int64(m)
			if err != nil {
				return written, fmt.Errorf("zipnn: write: %w", err)
			}
		}
	}
	// Nothing may follow the last payload.
	var one [1]byte
	if m, _ := io.ReadFull(src, one[:]); m != 0 {
		return written, fmt.Errorf("%w: bytes after the last chunk", ErrFormat)
	}
	return written, nil
}

func decodeChunk(c *coder, raw, payload []byte, e entry, idx int) error {
	if err := c.decode(raw, payload, e.method); err != nil {
		return fmt.Errorf("chunk %d: %w", idx, err)
	}
	if crc32.Checksum(raw, castagnoli) != e.crc {
		return fmt.Errorf("%w: chunk %d (raw bytes %d..%d)", ErrChecksum, idx, e.rawOff, e.rawOff+int64(e.rawLen))
	}
	return nil
}

// Reader gives random access to the original bytes of a container: ReadAt decodes only the
// chunks the range touches. It is safe for concurrent use.
type Reader struct {
	ra      io.ReaderAt
	h       header
	es      []entry
	coders  sync.Pool
	payload sync.Pool
}

// NewReader reads and checks the header and table of the container of size bytes in ra.
func NewReader(ra io.ReaderAt, size int64) (*Reader, error) {
	hb := make([]byte, headerSize)
	if _, err := ra.ReadAt(hb, 0); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	h, err := parseHeader(hb)
	if err != nil {
		return nil, err
	}
	if h.dataOffset() > size {
		return nil, fmt.Errorf("%w: table of %d chunks does not fit in %d bytes", ErrFormat, h.n, size)
	}
	_, es, err := readTable(io.NewSectionReader(ra, 0, size))
	if err != nil {
		return nil, err
	}
	if n := len(es); n > 0 && es[n-1].storedOff+int64(es[n-1].storedLen) != size || n == 0 && h.dataOffset() != size {
		return nil, fmt.Errorf("%w: payloads do not end at the end of the %d-byte file", ErrFormat, size)
	}
	r := &Reader{ra: ra, h: h, es: es}
	r.coders.New = func() any { return newCoder() }
	r.payload.New = func() any { b := make([]byte, maxStored); return &b }
	return r, nil
}

// Size returns the length of the original bytes.
func (r *Reader) Size() int64 { return r.h.rawSize }

// ReadAt implements io.ReaderAt over the original bytes.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("zipnn: negative offset %d", off)
	}
	if off >= r.h.rawSize {
		return 0, io.EOF
	}
	i := sort.Search(len(r.es), func(i int) bool { return r.es[i].rawOff+int64(r.es[i].rawLen) > off })
	c := r.coders.Get().(*coder)
	defer r.coders.Put(c)
	pb := r.payload.Get().(*[]byte)
	defer r.payload.Put(pb)
	raw := make([]byte, MaxChunk)
	n := 0
	for ; n < len(p) && i < len(r.es); i++ {
		e := r.es[i]
		payload := (*pb)[:e.storedLen]
		if _, err := r.ra.ReadAt(payload, e.storedOff); err != nil {
			return n, fmt.Errorf("zipnn: chunk %d: %w", i, err)
		}
		if err := decodeChunk(c, raw[:e.rawLen], payload, e, i); err != nil {
			return n, err
		}
		n += copy(p[n:], raw[off+int64(n)-e.rawOff:e.rawLen])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
