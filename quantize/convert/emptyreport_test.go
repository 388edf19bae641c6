package convert_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/reportview"
)

// TestPrefillOnlyFP8ReportIsEmptyList: converting only the prefill output of an FP8 source measures
// nothing; report.json then lists no tensors as [] (not null), and pdq report reads it.
func TestPrefillOnlyFP8ReportIsEmptyList(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, deepseekSource(t), out, convert.Options{Only: convert.KindPrefill, MaxShardSize: 1 << 20}, convert.RunOptions{Workers: 1})
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"tensors": []`) || strings.Contains(string(b), "null") {
		t.Fatalf("report.json of a prefill-only FP8 conversion:\n%s", b)
	}
	if _, err := reportview.Load(filepath.Join(out, "report.json")); err != nil {
		t.Fatal(err)
	}
}
