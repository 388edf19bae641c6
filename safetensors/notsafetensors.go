package safetensors

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrNotSafetensors: the file's first bytes cannot start a safetensors file (the header length
// they give is impossible) and look like another kind of file.
var ErrNotSafetensors = errors.New("not a safetensors file")

// notSafetensors wraps err, a header length error, with what the first bytes of the file say it
// is: JSON text (a config.json or an index), a zip archive (a PyTorch checkpoint), a Python
// pickle, gzip data, or text. It returns err unchanged when the bytes say nothing clear.
func notSafetensors(prefix []byte, err error) error {
	what := ""
	switch {
	case len(prefix) == 0:
		return err
	case prefix[0] == '{' || prefix[0] == '[':
		what = fmt.Sprintf("it starts with %q, like JSON text (a config.json or an index file?)", prefix[:1])
	case len(prefix) >= 2 && prefix[0] == 'P' && prefix[1] == 'K':
		what = `it starts with "PK", a zip archive (a PyTorch .bin or .pt checkpoint?)`
	case len(prefix) >= 2 && prefix[0] == 0x80 && prefix[1] <= 5:
		what = "it starts like a Python pickle (a PyTorch .bin checkpoint?)"
	case len(prefix) >= 2 && prefix[0] == 0x1f && prefix[1] == 0x8b:
		what = "it starts like gzip data (unpack it first)"
	case isText(prefix):
		what = fmt.Sprintf("it is text (starts with %q)", prefix)
	default:
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrNotSafetensors, what, err)
}

// isText reports bytes that are printable UTF-8 text (tabs and line ends allowed).
func isText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 && len(b) >= utf8.UTFMax {
			return false
		}
		if r == utf8.RuneError && n <= 1 {
			return true // a character cut off by the end of the prefix
		}
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return false
		}
		b = b[n:]
	}
	return true
}
