// Package zipnn compresses model weights losslessly, in the manner of ZipNN (arXiv 2411.05239):
// the exponent byte of every BF16 value is split into its own byte plane and Huffman-coded
// (klauspost/compress/huff0), the sign+mantissa plane is kept raw; FP8 and packed INT4 bytes are
// Huffman-coded whole. The file is cut into independent chunks, so decompression runs in parallel
// and any byte range can be read without decoding the rest.
//
// # Container format, version 1
//
// All integers are little-endian.
//
//	header, 32 bytes
//	  0  [4]byte  magic "PDQZ"
//	  4  uint16   version = 1
//	  6  uint16   flags = 0
//	  8  uint64   raw size: length of the original bytes
//	  16 uint32   chunk count n
//	  20 uint32   reserved = 0
//	  24 uint64   data offset = 32 + 16n + 4
//	chunk table, n entries of 16 bytes, in the order of the original bytes
//	  0  uint32   raw length, 1..MaxChunk
//	  4  uint32   stored length (bytes of payload)
//	  8  uint32   CRC32C (Castagnoli) of the chunk's raw bytes
//	  12 uint8    method
//	  13 [3]byte  zero
//	uint32        CRC32C of the header and the table
//	payloads      one per chunk, back to back, in table order, starting at the data offset
//
// A chunk's raw offset is the sum of the raw lengths before it (they add up to the raw size);
// its payload offset is the data offset plus the stored lengths before it (they add up to the
// rest of the file). Methods:
//
//	0 raw   payload = the raw bytes
//	1 huff  payload = huff0 Compress4X output (table and four streams); raw length < 256 KiB
//	2 rle   payload = one byte, repeated raw-length times
//	3 bf16  raw length even, h = raw length / 2, element i = bytes 2i, 2i+1 as a uint16 v:
//	        uint8  exponent-plane method (0 raw, 1 huff or 2 rle, as above)
//	        uint32 exponent-plane payload length e
//	        e bytes: the exponent plane, h bytes once decoded, byte i = (v >> 7) & 0xff
//	        h bytes: the sign+mantissa plane, byte i = (v >> 8) & 0x80 | v & 0x7f
//
// Chunks never span two tensors of a safetensors file, so each is coded by its tensor's dtype.
package zipnn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sentinel errors.
var (
	// ErrFormat: the bytes are not a well-formed version 1 container.
	ErrFormat = errors.New("zipnn: malformed container")
	// ErrChecksum: a chunk or the table does not match its CRC32C.
	ErrChecksum = errors.New("zipnn: checksum mismatch")
	// ErrNotSafetensors: PlanSafetensors was given something that is not a safetensors file.
	ErrNotSafetensors = errors.New("zipnn: not a safetensors file")
)

// Magic starts every container.
const Magic = "PDQZ"

// Version is the container version this package writes and reads.
const Version = 1

// MaxChunk is the largest raw length of a chunk.
const MaxChunk = 1 << 18

// Chunk sizes the encoder uses: huff0 codes at most 256 KiB - 1 per block, so byte-coded chunks
// take 128 KiB and BF16 chunks 256 KiB (whose exponent plane is 128 KiB).
const (
	bytesChunk = 1 << 17
	bf16Chunk  = 1 << 18
)

// Chunk methods.
const (
	methodRaw  = 0
	methodHuff = 1
	methodRLE  = 2
	methodBF16 = 3
)

const (
	headerSize = 32
	entrySize  = 16
	// maxStored bounds a payload: the encoder never stores more than the raw bytes plus the
	// bf16 method's 5-byte prefix, and falls back to raw before that.
	maxStored = MaxChunk + 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is one chunk of the table, with the offsets the reader derives from it.
type entry struct {
	rawLen, storedLen, crc uint32
	method                 uint8
	rawOff, storedOff      int64
}

// header is the fixed part of a container.
type header struct {
	rawSize int64
	n       uint32
}

func (h header) dataOffset() int64 { return headerSize + entrySize*int64(h.n) + 4 }

func putHeader(b []byte, h header) {
	copy(b[0:4], Magic)
	binary.LittleEndian.PutUint16(b[4:], Version)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.rawSize))
	binary.LittleEndian.PutUint32(b[16:], h.n)
	binary.LittleEndian.PutUint32(b[20:], 0)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.dataOffset()))
}

func parseHeader(b []byte) (header, error) {
	if len(b) < headerSize || string(b[0:4]) != Magic {
		return header{}, fmt.Errorf("%w: no %q magic", ErrFormat, Magic)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != Version {
		return header{}, fmt.Errorf("%w: version %d, want %d", ErrFormat, v, Version)
	}
	if binary.LittleEndian.Uint16(b[6:]) != 0 || binary.LittleEndian.Uint32(b[20:]) != 0 {
		return header{}, fmt.Errorf("%w: unknown flags", ErrFormat)
	}
	raw := binary.LittleEndian.Uint64(b[8:])
	h := header{n: binary.LittleEndian.Uint32(b[16:])}
	if raw > 1<<62 {
		return header{}, fmt.Errorf("%w: raw size %d", ErrFormat, raw)
	}
	h.rawSize = int64(raw)
	// Every chunk holds 1..MaxChunk raw bytes.
	if int64(h.n) > h.rawSize || int64(h.n)*MaxChunk < h.rawSize {
		return header{}, fmt.Errorf("%w: %d chunks cannot hold %d bytes", ErrFormat, h.n, h.rawSize)
	}
	if off := binary.LittleEndian.Uint64(b[24:]); off != uint64(h.dataOffset()) {
		return header{}, fmt.Errorf("%w: data offset %d, want %d", ErrFormat, off, h.dataOffset())
	}
	return h, nil
}

func putEntry(b []byte, e entry) {
	binary.LittleEndian.PutUint32(b[0:], e.rawLen)
	binary.LittleEndian.PutUint32(b[4:], e.storedLen)
	binary.LittleEndian.PutUint32(b[8:], e.crc)
	b[12], b[13], b[14], b[15] = e.method, 0, 0, 0
}

// parseTable decodes and checks the table that follows a header; hdrAndTable holds the header,
// the table and its CRC.
func parseTable(h header, hdrAndTable []byte) ([]entry, error) {
	end := headerSize + entrySize*int(h.n)
	if len(hdrAndTable) != end+4 {
		return nil, fmt.Errorf("%w: short table", ErrFormat)
	}
	if crc32.Checksum(hdrAndTable[:end], castagnoli) != binary.LittleEndian.Uint32(hdrAndTable[end:]) {
		return nil, fmt.Errorf("%w: header and table", ErrChecksum)
	}
	es := make([]entry, h.n)
	rawOff, storedOff := int64(0), h.dataOffset()
	for i := range es {
		b := hdrAndTable[headerSize+entrySize*i:]
		e := entry{
			rawLen: binary.LittleEndian.Uint32(b[0:]), storedLen: binary.LittleEndian.Uint32(b[4:]),
			crc: binary.LittleEndian.Uint32(b[8:]), method: b[12], rawOff: rawOff, storedOff: storedOff,
		}
		if b[13]|b[14]|b[15] != 0 {
			return nil, fmt.Errorf("%w: chunk %d: reserved bytes set", ErrFormat, i)
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%w: chunk %d: %v", ErrFormat, i, err)
		}
		rawOff += int64(e.rawLen)
		storedOff += int64(e.storedLen)
		es[i] = e
	}
	if rawOff != h.rawSize {
		return nil, fmt.Errorf("%w: chunks hold %d bytes, header says %d", ErrFormat, rawOff, h.rawSize)
	}
	return es, nil
}

// check validates an entry on its own.
func (e entry) check() error {
	if e.rawLen == 0 || e.rawLen > MaxChunk {
		return fmt.Errorf("raw length %d outside 1..%d", e.rawLen, MaxChunk)
	}
	if e.storedLen > maxStored {
		return fmt.Errorf("stored length %d over %d", e.storedLen, maxStored)
	}
	switch e.method {
	case methodRaw:
		if e.storedLen != e.rawLen {
			return fmt.Errorf("raw chunk stores %d bytes for %d", e.storedLen, e.rawLen)
		}
	case methodRLE:
		if e.storedLen != 1 {
			return fmt.Errorf("rle chunk stores %d bytes", e.storedLen)
		}
	case methodHuff:
		if e.rawLen >= 1<<18 {
			return fmt.Errorf("huff chunk of %d bytes", e.rawLen)
		}
	case methodBF16:
		if e.rawLen%2 != 0 || e.storedLen < 5+e.rawLen/2 {
			return fmt.Errorf("bf16 chunk of %d bytes stores %d", e.rawLen, e.storedLen)
		}
	default:
		return fmt.Errorf("unknown method %d", e.method)
	}
	return nil
}
