package fsutil

import "slices"

// Coverage is the set of byte ranges of one file (or one region of it) written so far, each
// with the CRC-32C of its bytes: ranges written in any order merge as they meet, and their
// checksums combine (CombineCRC32C), so the checksum of the whole is known when the last piece
// lands, without reading anything back. The zero Coverage is empty; it is not safe for
// concurrent use.
type Coverage struct {
	spans []Span // disjoint, sorted, adjacent ones merged
}

// Span is a half-open byte range [Lo, Hi) with the CRC-32C of its bytes.
type Span struct {
	Lo, Hi int64
	CRC    uint32
}

// join returns the span of a followed by b (b.Lo == a.Hi), its checksum combined.
func (a Span) join(b Span) Span {
	return Span{a.Lo, b.Hi, CombineCRC32C(a.CRC, b.CRC, b.Hi-b.Lo)}
}

// Add records the n bytes at off, whose CRC-32C is crc. A range overlapping one recorded
// before is refused: Add then returns that range and false and records nothing.
func (c *Coverage) Add(off, n int64, crc uint32) (Span, bool) {
	if n <= 0 {
		return Span{}, true
	}
	// First span ending after off: the only one that can overlap [off, off+n) from the left.
	j, _ := slices.BinarySearchFunc(c.spans, off, func(s Span, x int64) int {
		switch {
		case s.Hi < x+1:
			return -1
		case s.Hi > x+1:
			return 1
		}
		return 0
	})
	if j < len(c.spans) && c.spans[j].Lo < off+n {
		return c.spans[j], false
	}
	s := Span{off, off + n, crc}
	spans := c.spans
	mergeLeft := j > 0 && spans[j-1].Hi == s.Lo
	mergeRight := j < len(spans) && spans[j].Lo == s.Hi
	switch {
	case mergeLeft && mergeRight:
		spans[j-1] = spans[j-1].join(s).join(spans[j])
		spans = slices.Delete(spans, j, j+1)
	case mergeLeft:
		spans[j-1] = spans[j-1].join(s)
	case mergeRight:
		spans[j] = s.join(spans[j])
	default:
		spans = slices.Insert(spans, j, s)
	}
	c.spans = spans
	return Span{}, true
}

// Whole returns the CRC-32C of bytes [0, size) and true when they are all recorded (an empty
// region has checksum 0).
func (c *Coverage) Whole(size int64) (uint32, bool) {
	if size == 0 {
		return 0, true
	}
	if len(c.spans) == 1 && c.spans[0].Lo == 0 && c.spans[0].Hi == size {
		return c.spans[0].CRC, true
	}
	return 0, false
}

// Gaps returns the ranges of [0, size) not recorded, in order, as spans without checksums.
func (c *Coverage) Gaps(size int64) []Span {
	var gaps []Span
	pos := int64(0)
	for _, s := range c.spans {
		if s.Lo > pos {
			gaps = append(gaps, Span{Lo: pos, Hi: min(s.Lo, size)})
		}
		pos = max(pos, s.Hi)
	}
	if pos < size {
		gaps = append(gaps, Span{Lo: pos, Hi: size})
	}
	return gaps
}

// Reset makes c hold exactly one range, [0, n) with checksum crc (n = 0: nothing).
func (c *Coverage) Reset(n int64, crc uint32) {
	c.spans = c.spans[:0]
	if n > 0 {
		c.spans = append(c.spans, Span{0, n, crc})
	}
}
