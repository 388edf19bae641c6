package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// scanner is a strict JSON reader over a byte slice for the two documents this package reads
// (headers and index files). It follows RFC 8259, refuses nothing valid and accepts nothing
// invalid; the fuzz test holds it to that against encoding/json. Compared with the token API of
// encoding/json it is an order of magnitude faster and allocates only the strings it returns.
// The input must already be valid UTF-8.
type scanner struct {
	b []byte
	i int
}

// maxDepth bounds the nesting of skipped values, as encoding/json does.
const maxDepth = 10000

// errSyntax is wrapped by every error of the scanner.
var errSyntax = errors.New("invalid JSON")

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errSyntax, s.i, fmt.Sprintf(format, args...))
}

// ws skips JSON whitespace and returns the next byte, or 0 at the end of the input.
func (s *scanner) ws() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// expect skips whitespace and consumes c.
func (s *scanner) expect(c byte) error {
	if got := s.ws(); got != c {
		if got == 0 && s.i >= len(s.b) {
			return s.errorf("unexpected end, want %q", c)
		}
		return s.errorf("found %q, want %q", got, c)
	}
	s.i++
	return nil
}

// more is called inside an object or array after '{', '[' or an element. It consumes a ',' and
// reports true when another element follows, or consumes the closing byte and reports false.
// first says whether no element has been read yet.
func (s *scanner) more(closing byte, first bool) (bool, error) {
	c := s.ws()
	switch {
	case c == closing:
		s.i++
		return false, nil
	case first:
		return true, nil
	case c == ',':
		s.i++
		return true, nil
	case c == 0 && s.i >= len(s.b):
		return false, s.errorf("unexpected end, want ',' or %q", closing)
	}
	return false, s.errorf("found %q, want ',' or %q", c, closing)
}

// key reads an object key and the colon after it.
func (s *scanner) key() (string, error) {
	k, err := s.str()
	if err != nil {
		return "", err
	}
	return k, s.expect(':')
}

// keyBytes is key without allocating for keys that have no escapes: the bytes returned alias
// the input (or a decoded copy) and are only valid for comparison.
func (s *scanner) keyBytes() ([]byte, error) {
	k, err := s.strBytes()
	if err != nil {
		return nil, err
	}
	return k, s.expect(':')
}

// str reads a string. Strings without escapes are sliced directly; others are decoded by
// encoding/json so that escape handling (surrogates included) is exactly the standard one.
func (s *scanner) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// strBytes is str returning bytes that alias the input when the string has no escapes.
func (s *scanner) strBytes() ([]byte, error) {
	if c := s.ws(); c != '"' {
		return nil, s.unexpected("a string")
	}
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !escaped {
				return s.b[start+1 : s.i-1], nil
			}
			var out string
			if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
				s.i = start
				return nil, s.errorf("bad string: %v", err)
			}
			return []byte(out), nil
		case c == '\\':
			escaped = true
			s.i += 2 // the escaped byte cannot end the string; json.Unmarshal checks the rest
		case c < 0x20:
			return nil, s.errorf("control character %#02x in a string", c)
		default:
			s.i++
		}
	}
	s.i = len(s.b)
	return nil, s.errorf("unterminated string")
}

// number consumes a JSON number and returns its text, aliasing the input.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		s.i = start
		return nil, s.unexpected("a number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return nil, s.errorf("no digits after the decimal point")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return nil, s.errorf("no digits in the exponent")
		}
	}
	return s.b[start:s.i], nil
}

// uint reads a number that must be a non-negative integer no larger than 2^64-1.
func (s *scanner) uint() (uint64, error) {
	text, err := s.number()
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s is not a non-negative integer", text)
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, fmt.Errorf("%s is out of range", text)
		}
		v = v*10 + d
	}
	return v, nil
}

// literal consumes true, false or null.
func (s *scanner) literal() (string, error) {
	for _, lit := range []string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return lit, nil
		}
	}
	return "", s.unexpected("a value")
}

// kind names the value starting at the next non-space byte, for error messages.
func (s *scanner) kind() string {
	switch c := s.ws(); {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == 0 && s.i >= len(s.b):
		return "the end of the header"
	}
	return "an invalid character"
}

func (s *scanner) unexpected(want string) error {
	return s.errorf("found %s, want %s", s.kind(), want)
}

// skip consumes one value of any kind, found inside depth enclosing arrays and objects, and
// returns its bytes.
func (s *scanner) skip(depth int) ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skipValue(depth); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// skipValue consumes a value inside depth enclosing containers. Like encoding/json it refuses
// more than maxDepth nested containers.
func (s *scanner) skipValue(depth int) error {
	var err error
	switch c := s.ws(); {
	case c == '{' || c == '[':
		if depth+1 > maxDepth {
			return s.errorf("nesting deeper than %d", maxDepth)
		}
		s.i++
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		for first := true; ; first = false {
			var ok bool
			if ok, err = s.more(closing, first); err != nil || !ok {
				return err
			}
			if c == '{' {
				if _, err = s.key(); err != nil {
					return err
				}
			}
			if err = s.skipValue(depth + 1); err != nil {
				return err
			}
		}
	case c == '"':
		_, err = s.strBytes()
	case c == '-' || c >= '0' && c <= '9':
		_, err = s.number()
	default:
		_, err = s.literal()
	}
	return err
}

// end checks that only whitespace remains.
func (s *scanner) end() error {
	if s.ws(); s.i < len(s.b) {
		return s.errorf("data after the top-level value")
	}
	return nil
}
