package zipnn

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/huff0"
)

// coder holds one worker's reusable buffers; it codes one chunk at a time.
type coder struct {
	s     huff0.Scratch
	plane []byte // exponent plane (encode and decode)
	sm    []byte // sign+mantissa plane (encode)
}

func newCoder() *coder {
	c := &coder{plane: make([]byte, MaxChunk/2), sm: make([]byte, MaxChunk/2)}
	c.s.Reuse = huff0.ReusePolicyNone // every chunk carries its own table
	return c
}

// encodePlane appends the best coding of b to dst and returns the method used.
func (c *coder) encodePlane(dst, b []byte) ([]byte, uint8) {
	out, _, err := huff0.Compress4X(b, &c.s)
	switch {
	case err == nil && len(out) < len(b):
		return append(dst, out...), methodHuff
	case errors.Is(err, huff0.ErrUseRLE):
		return append(dst, b[0]), methodRLE
	default: // ErrIncompressible, or too small for four streams
		return append(dst, b...), methodRaw
	}
}

// encode appends the payload of one chunk of raw bytes to dst; bf16 asks for the exponent split.
// The result is never longer than raw: the raw method is the fallback.
func (c *coder) encode(dst, raw []byte, bf16 bool) ([]byte, uint8) {
	start := len(dst)
	if !bf16 || len(raw)%2 != 0 {
		return c.encodePlane(dst, raw)
	}
	h := len(raw) / 2
	exp, sm := c.plane[:h], c.sm[:h]
	splitBF16(exp, sm, raw)
	dst = append(dst, 0, 0, 0, 0, 0)
	dst, m := c.encodePlane(dst, exp)
	dst[start] = m
	binary.LittleEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-5))
	dst = append(dst, sm...)
	if len(dst)-start >= len(raw) {
		return append(dst[:start], raw...), methodRaw
	}
	return dst, methodBF16
}

// splitBF16 puts the exponent of each little-endian BF16 value of raw in exp and its sign and
// mantissa in sm. Eight values at a time through 64-bit words; splitBF16Generic is the
// specification and does the tail.
func splitBF16(exp, sm, raw []byte) {
	if len(exp) == 0 {
		return
	}
	n := len(exp) &^ 7
	_ = raw[2*len(exp)-1]
	_ = sm[len(exp)-1]
	for i := 0; i < n; i += 8 {
		a := binary.LittleEndian.Uint64(raw[2*i:])
		b := binary.LittleEndian.Uint64(raw[2*i+8:])
		binary.LittleEndian.PutUint64(exp[i:], pack16(a>>7&0x00ff00ff00ff00ff)|pack16(b>>7&0x00ff00ff00ff00ff)<<32)
		binary.LittleEndian.PutUint64(sm[i:], pack16(smLanes(a))|pack16(smLanes(b))<<32)
	}
	splitBF16Generic(exp[n:], sm[n:], raw[2*n:])
}

// smLanes keeps sign (bit 15 to bit 7) and mantissa (bits 6..0) in each 16-bit lane.
func smLanes(x uint64) uint64 { return x>>8&0x0080008000800080 | x&0x007f007f007f007f }

// pack16 gathers the low bytes of four 16-bit lanes into the low 32 bits.
func pack16(x uint64) uint64 {
	x = (x | x>>8) & 0x0000ffff0000ffff
	return (x | x>>16) & 0x00000000ffffffff
}

// spread16 is the inverse of pack16: four bytes to the low bytes of four 16-bit lanes.
func spread16(x uint64) uint64 {
	x = (x | x<<16) & 0x0000ffff0000ffff
	return (x | x<<8) & 0x00ff00ff00ff00ff
}

func splitBF16Generic(exp, sm, raw []byte) {
	for i := range exp {
		lo, hi := raw[2*i], raw[2*i+1]
		exp[i] = hi<<1 | lo>>7
		sm[i] = hi&0x80 | lo&0x7f
	}
}

// joinBF16 is the inverse of splitBF16.
func joinBF16(raw, exp, sm []byte) {
	if len(exp) == 0 {
		return
	}
	n := len(exp) &^ 7
	_ = raw[2*len(exp)-1]
	_ = sm[len(exp)-1]
	for i := 0; i < n; i += 8 {
		e := binary.LittleEndian.Uint64(exp[i:])
		s := binary.LittleEndian.Uint64(sm[i:])
		lo := (e&0x0101010101010101)<<7 | s&0x7f7f7f7f7f7f7f7f
		hi := s&0x8080808080808080 | e>>1&0x7f7f7f7f7f7f7f7f
		binary.LittleEndian.PutUint64(raw[2*i:], spread16(lo&0xffffffff)|spread16(hi&0xffffffff)<<8)
		binary.LittleEndian.PutUint64(raw[2*i+8:], spread16(lo>>32)|spread16(hi>>32)<<8)
	}
	joinBF16Generic(raw[2*n:], exp[n:], sm[n:])
}

func joinBF16Generic(raw, exp, sm []byte) {
	for i := range exp {
		e, s := exp[i], sm[i]
		raw[2*i] = e<<7 | s&0x7f
		raw[2*i+1] = s&0x80 | e>>1
	}
}

// decodePlane decodes a plane payload of method m into dst, which it fills exactly.
func (c *coder) decodePlane(dst, payload []byte, m uint8) error {
	switch m {
	case methodRaw:
		if len(payload) != len(dst) {
			return fmt.Errorf("%w: raw plane of %d bytes for %d", ErrFormat, len(payload), len(dst))
		}
		copy(dst, payload)
	case methodRLE:
		if len(payload) != 1 {
			return fmt.Errorf("%w: rle plane of %d bytes", ErrFormat, len(payload))
		}
		for i := range dst {
			dst[i] = payload[0]
		}
	case methodHuff:
		if len(dst) > huff0.BlockSizeMax {
			return fmt.Errorf("%w: huff plane of %d bytes", ErrFormat, len(dst))
		}
		s, rest, err := huff0.ReadTable(payload, &c.s)
		if err != nil {
			return fmt.Errorf("%w: huffman table: %v", ErrFormat, err)
		}
		s.MaxDecodedSize = len(dst)
		out, err := s.Decoder().Decompress4X(dst[:0:len(dst)], rest)
		if err != nil {
			return fmt.Errorf("%w: huffman data: %v", ErrFormat, err)
		}
		if len(out) != len(dst) {
			return fmt.Errorf("%w: huffman data decodes to %d bytes, want %d", ErrFormat, len(out), len(dst))
		}
		if &out[0] != &dst[0] {
			copy(dst, out)
		}
	default:
		return fmt.Errorf("%w: unknown plane method %d", ErrFormat, m)
	}
	return nil
}

// decode fills dst (the chunk's raw length) from its payload.
func (c *coder) decode(dst, payload []byte, m uint8) error {
	if m != methodBF16 {
		return c.decodePlane(dst, payload, m)
	}
	h := len(dst) / 2
	if len(dst)%2 != 0 || len(payload) < 5 {
		return fmt.Errorf("%w: bf16 chunk", ErrFormat)
	}
	em := payload[0]
	if em == methodBF16 {
		return fmt.Errorf("%w: nested bf16 plane", ErrFormat)
	}
	e := binary.LittleEndian.Uint32(payload[1:])
	if uint64(e)+5+uint64(h) != uint64(len(payload)) {
		return fmt.Errorf("%w: bf16 planes of %d+%d bytes in a %d-byte payload", ErrFormat, e, h, len(payload))
	}
	exp := c.plane[:h]
	if err := c.decodePlane(exp, payload[5:5+e], em); err != nil {
		return err
	}
	joinBF16(dst, exp, payload[5+e:])
	return nil
}
