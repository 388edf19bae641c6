package termsafe

import (
	"bytes"
	"encoding/json"
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

// TestJSONWriter: C1 controls and format characters that encoding/json leaves raw are escaped;
// the document decodes to the same value.
func TestJSONWriter(t *testing.T) {
	in := map[string]string{"name": "a\u009b31m\u202eb\U000e0001c\x1b"}
	var b bytes.Buffer
	if err := json.NewEncoder(JSONWriter(&b)).Encode(in); err != nil {
		t.Fatal(err)
	}
	for _, r := range b.String() {
		if unsafe(r) && r != '\n' {
			t.Fatalf("raw %U in %q", r, b.String())
		}
	}
	var out map[string]string
	if err := json.Unmarshal(b.Bytes(), &out); err != nil || out["name"] != in["name"] {
		t.Fatalf("decoded %q, %v; want %q", out["name"], err, in["name"])
	}
}
