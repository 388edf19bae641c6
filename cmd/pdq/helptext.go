package main

import (
	"strings"

	"pdq/quantize/convert"
)

// wrapText fills text into lines of at most width columns (a longer word stands alone), breaking
// only between words; paragraphs are the caller's.
func wrapText(text string, width int) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(text) {
		switch {
		case line == 0:
		case line+1+len(w) > width:
			b.WriteByte('\n')
			line = 0
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// exampleFormat is the decode format the help's examples use: the first registered after the
// default (INT4), or the default when it is the only one.
func exampleFormat() convert.FormatInfo {
	fs := convert.Formats()
	if len(fs) > 1 {
		return fs[1]
	}
	return fs[0]
}

// formatTitles are the decode formats' titles, in their order, comma-separated.
func formatTitles() string {
	var out []string
	for _, f := range convert.Formats() {
		out = append(out, f.Title)
	}
	return strings.Join(out, ", ")
}

// joinList joins words with commas, the last two with conj ("a, b and c").
func joinList(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}
