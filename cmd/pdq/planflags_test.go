package main

import (
	"slices"
	"strings"
	"testing"

	"pdq/quantize/convert"
)

// TestDecodeFormatDocs: every decode format the library takes is described, once, in its order,
// in both the flag's help and pdq convert --help, and the list fits the help's width.
func TestDecodeFormatDocs(t *testing.T) {
	infos := convert.Formats()
	if len(infos) != len(convert.DecodeFormats) {
		t.Fatalf("%d formats described, %d in convert.DecodeFormats", len(infos), len(convert.DecodeFormats))
	}
	list := decodeFormatList(21)
	for i, f := range convert.DecodeFormats {
		if infos[i].Format != f {
			t.Errorf("entry %d describes %q, want %q", i, infos[i].Format, f)
		}
		if infos[i].Layout == "" || infos[i].GPUs == "" || infos[i].Title == "" {
			t.Errorf("%s: no layout, GPU line or title to describe it", f)
		}
		if !strings.Contains(decodeFormatHelp(), string(f)+" (") {
			t.Errorf("--decode-format help does not describe %s", f)
		}
		if !strings.Contains(list, "  "+string(f)+" ") {
			t.Errorf("convert --help's list does not describe %s:\n%s", f, list)
		}
		if g := f.FixedGroup(); g > 0 && !strings.Contains(strings.Join(strings.Fields(list), " "), string(f)+" ") {
			t.Errorf("no entry for %s", f)
		} else if g > 0 && !strings.Contains(entry(list, string(f)), "fixed groups of "+itoa(g)) {
			t.Errorf("convert --help's list does not say %s fixes groups of %d", f, g)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(list, "\n"), "\n") {
		if len(line) > 98 {
			t.Errorf("line wider than 98 columns: %q", line)
		}
	}
}

// entry is the unwrapped text of format f's entry in list.
func entry(list, f string) string {
	words := strings.Fields(list)
	for i, w := range words {
		if w == f {
			var out []string
			for _, x := range words[i+1:] {
				if slices.Contains(convert.DecodeFormats, convert.DecodeFormat(x)) {
					break
				}
				out = append(out, x)
			}
			return strings.Join(out, " ")
		}
	}
	return ""
}

// TestHelpNamesEveryFormat: the helps that list decode formats list every registered one (they
// are made from the registry, so a new format appears without editing them).
func TestHelpNamesEveryFormat(t *testing.T) {
	conv, verify, cmp := newConvertCmd(), newVerifyCmd(), newCompareCmd()
	sqnr := conv.Flags().Lookup("fail-sqnr-below").Usage
	group := conv.Flags().Lookup("group-size").Usage
	for _, f := range convert.Formats() {
		if !strings.Contains(sqnr, f.Title) {
			t.Errorf("--fail-sqnr-below's help does not name %s: %q", f.Title, sqnr)
		}
		if !strings.Contains(strings.Join(strings.Fields(verify.Long), " "), f.Title) {
			t.Errorf("verify --help does not name %s", f.Title)
		}
		if f.FixedGroup > 0 && !strings.Contains(group, string(f.Format)) {
			t.Errorf("--group-size's help does not say %s fixes its groups: %q", f.Format, group)
		}
		if f.Compare != nil {
			long := strings.Join(strings.Fields(cmp.Long), " ")
			if !strings.Contains(long, string(f.Format)+" ("+f.Compare.Doc+")") || !strings.Contains(cmp.Short, f.Title) {
				t.Errorf("compare --help does not describe %s", f.Format)
			}
		}
	}
}
