package reportview

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// The fixtures are real reports: `pdq testdata gen --out src --layers 4 --experts 4` (BF16, so both
// outputs quantize), then `pdq convert src --out mse` and `pdq convert src --out rtn --method rtn`.
const (
	fixture    = "testdata/report.json"
	fixtureRTN = "testdata/report_rtn.json"
)

func TestGolden(t *testing.T) {
	rep, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	repRTN, err := Load(fixtureRTN)
	if err != nil {
		t.Fatal(err)
	}
	th := Thresholds{SQNRBelow: 19.5, RelRMSEAbove: 0.105}
	for _, tc := range []struct {
		name    string
		q       Query
		th      Thresholds
		against bool
	}{
		{name: "default", q: Query{Top: 20}, th: NoThresholds},
		{name: "decode_experts_by_rel_rmse", q: Query{Top: 8, Sort: SortRelRMSE, Output: "decode", Roles: []string{"routed_experts"}}, th: NoThresholds},
		{name: "filter_by_max_abs_err", q: Query{Top: 6, Sort: SortMaxAbsErr, Filter: regexp.MustCompile(`layers\.[12]\..*(down|o)_proj`)}, th: NoThresholds},
		{name: "by_name_all", q: Query{Sort: SortName, Roles: []string{"attention", "dense_mlp"}}, th: NoThresholds},
		{name: "thresholds", q: Query{Top: 5}, th: th},
		{name: "against_rtn", q: Query{Top: 10}, th: NoThresholds, against: true},
		{name: "against_rtn_decode_thresholds", q: Query{Top: 5, Output: "decode"}, th: th, against: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewView(fixture, rep, tc.q, tc.th)
			if tc.against {
				v.Compare(fixtureRTN, repRTN)
			}
			for _, f := range []struct {
				ext    string
				render func(*bytes.Buffer, *View) error
			}{
				{"txt", func(b *bytes.Buffer, v *View) error { return WriteTable(b, v) }},
				{"json", func(b *bytes.Buffer, v *View) error { return WriteJSON(b, v) }},
				{"csv", func(b *bytes.Buffer, v *View) error { return WriteCSV(b, v) }},
			} {
				var b bytes.Buffer
				if err := f.render(&b, v); err != nil {
					t.Fatal(err)
				}
				checkGolden(t, filepath.Join("testdata", "golden", tc.name+"."+f.ext), b.Bytes())
			}
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test -run TestGolden -update rewrites it); got:\n%s", path, got)
	}
}
