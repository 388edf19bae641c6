package termsafe

import (
	"bytes"
	"fmt"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want, line string }{
		{"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"t\x1b]0;pwned\x07", `t\x1b]0;pwned\x07`, `t\x1b]0;pwned\x07`},
		{"x\u009b31m", `x\u009b31m`, `x\u009b31m`},
		{"rtl\u202eexe", `rtl\u202eexe`, `rtl\u202eexe`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
		{"two\nlines\tok", "two\nlines\tok", `two\nlines\tok`},
		{"ΔSQNR ≥ 18 dB █", "ΔSQNR ≥ 18 dB █", "ΔSQNR ≥ 18 dB █"},
		{"cr\rover", `cr\x0dover`, `cr\x0dover`},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := Line(tc.in); got != tc.line {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	fmt.Fprintf(Writer(&b), "name %s\n", "evil\x1b[2J")
	if got, want := b.String(), "name evil\\x1b[2J\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func FuzzString(f *testing.F) {
	f.Add("a\x1b[2Jb\u009b\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{String(s), Line(s)} {
			for _, r := range out {
				if unsafe(r) && r != '\n' && r != '\t' {
					t.Fatalf("%q escaped to %q, which holds %U", s, out, r)
				}
			}
		}
	})
}
