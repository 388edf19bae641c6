package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONWriter returns a writer for JSON documents (encoding/json's output) that writes the runes a
// terminal could act on and encoding/json leaves raw (C1 controls, bidirectional overrides and
// other invisible format characters) as \u escapes: the same JSON to a decoder, inert on a
// terminal. Each Write must hold whole runes (an Encoder writes a value at once).
func JSONWriter(w io.Writer) io.Writer { return &jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j *jsonWriter) Write(p []byte) (int, error) {
	s := string(p)
	if clean(s) {
		return j.w.Write(p)
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafe(r) || r == utf8.RuneError:
			b.WriteRune(r) // encoding/json writes invalid UTF-8 as U+FFFD already
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	if _, err := io.WriteString(j.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
