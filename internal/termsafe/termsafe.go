// Package termsafe escapes what a terminal would act on in text that comes from files: tensor
// names, a calibration file's source, paths. Escape sequences (ESC, CSI, OSC), other control
// characters, invisible format characters (bidirectional overrides) and invalid UTF-8 are
// written as Go escapes (\x1b, \u202e), so a hostile name can neither clear the screen, set the
// window title nor forge lines of output. Newlines and tabs, which the output itself uses, pass.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every rune a terminal could act on escaped.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	escape(&b, s, false)
	return b.String()
}

// Line is String that also escapes newlines and tabs: for one field shown on one line.
func Line(s string) string {
	if clean(s) && !strings.ContainsAny(s, "\n\t") {
		return s
	}
	var b strings.Builder
	escape(&b, s, true)
	return b.String()
}

func clean(s string) bool {
	for _, r := range s {
		if unsafe(r) {
			return false
		}
	}
	return true
}

// unsafe reports a rune that is escaped (utf8.RuneError stands for invalid bytes too).
func unsafe(r rune) bool {
	return r == utf8.RuneError || r != '\n' && r != '\t' && !unicode.IsGraphic(r)
}

func escape(b *strings.Builder, s string, line bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case line && r == '\n':
			b.WriteString(`\n`)
		case line && r == '\t':
			b.WriteString(`\t`)
		case unsafe(r) && r < 0x80:
			fmt.Fprintf(b, `\x%02x`, r)
		case unsafe(r) && r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		case unsafe(r):
			fmt.Fprintf(b, `\U%08x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// Writer returns a writer that escapes, as String does, everything written through it to w.
// Each Write is escaped on its own: write whole strings (fmt.Fprintf does).
func Writer(w io.Writer) io.Writer { return &writer{w} }

type writer struct{ w io.Writer }

func (t *writer) Write(p []byte) (int, error) {
	s := string(p)
	if clean(s) {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, String(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}
