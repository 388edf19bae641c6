package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/reportview"
)

const (
	reportFixture    = "../../reportview/testdata/report.json"
	reportFixtureRTN = "../../reportview/testdata/report_rtn.json"
)

// runPDQ runs the root command as main does and returns stdout and the exit status main would use.
func runPDQ(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = exitFailure
		var ue usageError
		if errors.As(err, &ue) || isCobraUsage(err) {
			code = exitUsage
		}
	}
	return out.String(), code, err
}

func TestReportCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or in the error when the command fails
	}{
		{"table", []string{reportFixture}, 0, "worst 20 of 104 by SQNR"},
		{"filters", []string{reportFixture, "--role", "routed_experts", "--output", "prefill", "--top", "3", "--sort", "max_abs_err"}, 0, "worst 3 of 36 by max abs error"},
		{"repeated role", []string{reportFixture, "--role", "attention", "--role", "dense_mlp", "--sort", "name", "--top", "0"}, 0, "first 23 of 23 by name"},
		{"against", []string{reportFixture, "--against", reportFixtureRTN, "--top", "4"}, 0, "biggest movers, 4 of 104"},
		{"directory", []string{filepath.Dir(reportFixture), "--top", "1"}, 0, "worst 1 of 104 by SQNR"},
		{"thresholds pass", []string{reportFixture, "--fail-sqnr-below", "18", "--fail-rel-rmse-above", "0.2"}, 0, "all 104 selected tensors pass"},
		{"sqnr floor", []string{reportFixture, "--fail-sqnr-below", "18.5"}, 1, "4 of 104 selected tensors over the thresholds"},
		{"rel rmse ceiling", []string{reportFixture, "--output", "decode", "--fail-rel-rmse-above", "0.12"}, 1, "4 of 36 selected tensors over the thresholds"},
		{"missing file", []string{"nope/report.json"}, 1, "nope/report.json"},
		{"not a report", []string{"../../go.mod"}, 1, "not a pdq report"},
		{"no argument", nil, 2, "want 1 argument"},
		{"two arguments", []string{reportFixture, reportFixture}, 2, "want 1 argument"},
		{"bad sort", []string{reportFixture, "--sort", "sqnr_db"}, 2, "unknown sort order"},
		{"json and csv", []string{reportFixture, "--json", "--csv"}, 2, "exclude each other"},
		{"bad output", []string{reportFixture, "--output", "both"}, 2, "want prefill or decode"},
		{"bad regex", []string{reportFixture, "--filter", "experts.(1"}, 2, "--filter"},
		{"unknown role", []string{reportFixture, "--role", "routed_expert"}, 2, "the report has: attention, dense_mlp, routed_experts, shared_experts"},
		{"bad plot name", []string{reportFixture, "--plot", "x.gif"}, 2, "must end in .png or .svg"},
		{"negative top", []string{reportFixture, "--top", "-1"}, 2, "--top -1"},
		{"bad number", []string{reportFixture, "--fail-sqnr-below", "high"}, 2, "invalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code, err := runPDQ(t, append([]string{"report"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			text := out
			if err != nil {
				text = err.Error()
			}
			if !strings.Contains(text, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, text)
			}
		})
	}
}

func TestReportMachineOutputs(t *testing.T) {
	out, code, err := runPDQ(t, "report", reportFixture, "--json", "--top", "3", "--fail-sqnr-below", "18.5")
	if code != 1 {
		t.Fatalf("exit %d (%v), want 1", code, err)
	}
	var doc struct {
		Tensors  []json.RawMessage `json:"tensors"`
		Failures []json.RawMessage `json:"failures"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if len(doc.Tensors) != 3 || len(doc.Failures) != 4 {
		t.Fatalf("--json: %d tensors, %d failures; want 3 and 4", len(doc.Tensors), len(doc.Failures))
	}
	out, code, err = runPDQ(t, "report", reportFixture, "--csv", "--top", "0")
	if code != 0 {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 105 || recs[0][0] != "output" {
		t.Fatalf("--csv: %d records, %v", len(recs), err)
	}
}

func TestReportFiles(t *testing.T) {
	dir := t.TempDir()
	plot, svg, page := filepath.Join(dir, "sqnr.png"), filepath.Join(dir, "delta.svg"), filepath.Join(dir, "report.html")
	if _, code, err := runPDQ(t, "report", reportFixture, "--plot", plot, "--html", page, "--fail-sqnr-below", "18.5"); code != 1 {
		t.Fatalf("exit %d (%v), want 1: files are written, then the thresholds fail", code, err)
	}
	if _, code, err := runPDQ(t, "report", reportFixture, "--against", reportFixtureRTN, "--plot", svg); code != 0 {
		t.Fatal(err)
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("%s: %v", plot, err)
	}
	for path, prefix := range map[string]string{svg: "<?xml", page: "<!DOCTYPE html>"} {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte(prefix)) {
			t.Fatalf("%s: %v, starts %.20q", path, err, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("%d files in the output directory, want 3 (no temporary files left)", len(entries))
	}
	// A selection with nothing to draw fails and leaves no file behind.
	empty := filepath.Join(dir, "empty.png")
	_, code, err := runPDQ(t, "report", reportFixture, "--output", "decode", "--role", "attention", "--plot", empty)
	if code != 1 || !errors.Is(err, reportview.ErrNothingToPlot) {
		t.Fatalf("exit %d (%v), want 1 with nothing to plot", code, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Fatalf("%d files after a failed plot, want 3", len(entries))
	}
}
