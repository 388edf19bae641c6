package zipnn

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"

	"pdq/internal/par"
)

// Kind says how a segment of the original bytes is coded.
type Kind uint8

// Segment kinds.
const (
	// KindBytes: Huffman-code the bytes as they are (FP8, packed INT4, headers, anything).
	KindBytes Kind = iota
	// KindBF16: little-endian BF16 values; the exponent byte plane is Huffman-coded.
	KindBF16
)

// String names the kind.
func (k Kind) String() string {
	if k == KindBF16 {
		return "bf16"
	}
	return "bytes"
}

// Segment is a byte range of the original coded one way; chunks never cross segments.
type Segment struct {
	Off, Len int64
	Kind     Kind
}

// Stats describes a finished compression.
type Stats struct {
	RawSize, StoredSize int64
	Chunks              int
	// RawByKind and StoredByKind split the sizes by segment kind (payload bytes only).
	RawByKind, StoredByKind [2]int64
}

// Ratio is raw size over stored size.
func (s Stats) Ratio() float64 {
	if s.StoredSize == 0 {
		return 1
	}
	return float64(s.RawSize) / float64(s.StoredSize)
}

// Options tune Compress and Decompress.
type Options struct {
	// Workers is how many chunks are coded at once (default GOMAXPROCS). The output does not
	// depend on it.
	Workers int
	// CheckSize makes Decompress refuse, before writing a byte, a container whose header does not
	// promise exactly Size original bytes (the size a manifest gives): a container cannot make a
	// reader write more than it was told to expect.
	CheckSize bool
	Size      int64
}

func (o Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

type chunkSpec struct {
	off  int64
	n    int
	kind Kind
}

// chunksOf cuts a plan into chunks after checking that it tiles [0, size).
func chunksOf(plan []Segment, size int64) ([]chunkSpec, error) {
	var out []chunkSpec
	pos := int64(0)
	for i, sg := range plan {
		if sg.Off != pos || sg.Len < 0 || sg.Kind > KindBF16 {
			return nil, fmt.Errorf("zipnn: plan segment %d (%d+%d %s) does not follow byte %d", i, sg.Off, sg.Len, sg.Kind, pos)
		}
		step := int64(bytesChunk)
		if sg.Kind == KindBF16 {
			step = bf16Chunk
		}
		for o := int64(0); o < sg.Len; o += step {
			out = append(out, chunkSpec{off: sg.Off + o, n: int(min(step, sg.Len-o)), kind: sg.Kind})
		}
		pos += sg.Len
	}
	if pos != size {
		return nil, fmt.Errorf("zipnn: plan covers %d bytes of %d", pos, size)
	}
	if len(out) > 1<<32-1 {
		return nil, fmt.Errorf("zipnn: %d chunks is too many", len(out))
	}
	return out, nil
}

// PlanBytes codes a whole file as bytes.
func PlanBytes(size int64) []Segment {
	if size == 0 {
		return nil
	}
	return []Segment{{Off: 0, Len: size, Kind: KindBytes}}
}

// slot holds one chunk of a batch in flight.
type slot struct {
	raw, payload []byte
	e            entry
	kind         Kind
}

// Compress writes the container of the size bytes of src, coded by plan, to dst (header and table
// at offset 0, payloads after). The same input and plan always give the same bytes, whatever the
// number of workers. Memory is a few chunks per worker.
func Compress(ctx context.Context, dst io.WriterAt, src io.ReaderAt, size int64, plan []Segment, opts Options) (Stats, error) {
	chunks, err := chunksOf(plan, size)
	if err != nil {
		return Stats{}, err
	}
	h := header{rawSize: size, n: uint32(len(chunks))}
	table := make([]byte, h.dataOffset())
	putHeader(table, h)
	st := Stats{RawSize: size, Chunks: len(chunks)}
	storedOff := h.dataOffset()

	workers := opts.workers()
	batch := make([]slot, 4*workers)
	for i := range batch {
		batch[i].raw = make([]byte, MaxChunk)
		batch[i].payload = make([]byte, 0, maxStored)
	}
	coders := make(chan *coder, workers)
	for range workers {
		coders <- newCoder()
	}
	for first := 0; first < len(chunks); first += len(batch) {
		n := min(len(batch), len(chunks)-first)
		// Each chunk is coded into its own slot; they are written below in order.
		err := par.ForEach(ctx, n, workers, func(i int) error {
			sl, cs := &batch[i], chunks[first+i]
			c := <-coders
			defer func() { coders <- c }()
			raw := sl.raw[:cs.n]
			if _, err := src.ReadAt(raw, cs.off); err != nil {
				return fmt.Errorf("zipnn: read %d bytes at %d: %w", cs.n, cs.off, err)
			}
			var m uint8
			sl.payload, m = c.encode(sl.payload[:0], raw, cs.kind == KindBF16)
			sl.kind = cs.kind
			sl.e = entry{rawLen: uint32(cs.n), storedLen: uint32(len(sl.payload)), crc: crc32.Checksum(raw, castagnoli), method: m}
			return nil
		})
		if err != nil {
			return Stats{}, err
		}
		for i := range n {
			sl := &batch[i]
			if _, err := dst.WriteAt(sl.payload, storedOff); err != nil {
				return Stats{}, fmt.Errorf("zipnn: write: %w", err)
			}
			putEntry(table[headerSize+entrySize*(first+i):], sl.e)
			storedOff += int64(len(sl.payload))
			st.RawByKind[sl.kind] += int64(sl.e.rawLen)
			st.StoredByKind[sl.kind] += int64(sl.e.storedLen)
		}
	}
	end := len(table) - 4
	putUint32(table[end:], crc32.Checksum(table[:end], castagnoli))
	if _, err := dst.WriteAt(table, 0); err != nil {
		return Stats{}, fmt.Errorf("zipnn: write table: %w", err)
	}
	st.StoredSize = storedOff
	return st, nil
}

func putUint32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
