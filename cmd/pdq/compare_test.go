package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateCompare = flag.Bool("update-compare", false, "rewrite testdata/compare.golden")

// compareSource generates the tiny FP8 DeepSeek-style checkpoint of pdq testdata gen --fp8.
func compareSource(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if _, errOut, code := runMain(t, "testdata", "gen", "--out", src, "--fp8"); code != 0 {
		t.Fatal(errOut)
	}
	return src
}

// TestCompareGolden: the table of pdq compare on a generated checkpoint, serving columns
// included, is the golden one (go test ./cmd/pdq -run TestCompareGolden -update-compare
// rewrites it after a deliberate change).
func TestCompareGolden(t *testing.T) {
	src := compareSource(t)
	out, errOut, code := runMain(t, "compare", src, "--gpu-memory", "80GiB", "--tp", "2", "--workers", "3")
	if code != 0 {
		t.Fatal(errOut)
	}
	golden := filepath.Join("testdata", "compare.golden")
	if *updateCompare {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("pdq compare printed\n%s\nwant (%s)\n%s", out, golden, want)
	}
	// One worker prints the same.
	if again, _, _ := runMain(t, "compare", src, "--gpu-memory", "80GiB", "--tp", "2", "--workers", "1"); again != out {
		t.Errorf("--workers 1 printed\n%s", again)
	}
}

// TestCompareJSONCSVPlot: --json holds every format's figures, --csv a line per format and
// group, --plot writes its picture and says so.
func TestCompareJSONCSVPlot(t *testing.T) {
	src := compareSource(t)
	out, errOut, code := runMain(t, "compare", src, "--json", "--sample", "2", "--formats", "int4,mxfp4")
	if code != 0 {
		t.Fatal(errOut)
	}
	var doc struct {
		Measured int `json:"measured_modules"`
		Targets  int `json:"target_modules"`
		Formats  []struct {
			Format  string `json:"format"`
			Overall struct {
				SQNR float64 `json:"sqnr_db"`
			} `json:"overall"`
			Cells       []json.RawMessage `json:"cells"`
			TargetBytes int64             `json:"target_bytes"`
		} `json:"formats"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Measured != 2*2*3 || doc.Targets != 2*8*3 || len(doc.Formats) != 2 || doc.Formats[0].Format != "int4-g32" ||
		doc.Formats[1].Format != "mxfp4" || !(doc.Formats[0].Overall.SQNR > 10) || len(doc.Formats[1].Cells) != 2*3 ||
		doc.Formats[1].TargetBytes >= doc.Formats[0].TargetBytes {
		t.Errorf("JSON document:\n%s", out)
	}
	out, errOut, code = runMain(t, "compare", src, "--csv", "--layers", "2", "--formats", "nvfp4")
	if code != 0 {
		t.Fatal(errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// header, all, 3 projections, 1 layer, 3 cells
	if len(recs) != 1+1+3+1+3 || recs[1][1] != "all" || recs[8][1] != "2" || recs[8][2] != "down_proj" {
		t.Errorf("CSV:\n%s", out)
	}
	plot := filepath.Join(t.TempDir(), "sqnr.svg")
	out, errOut, code = runMain(t, "compare", src, "--sample", "1", "--plot", plot)
	if code != 0 {
		t.Fatal(errOut)
	}
	b, err := os.ReadFile(plot)
	if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(out, "wrote "+plot) {
		t.Errorf("plot: %v, %d bytes; output\n%s", err, len(b), out)
	}
}

// TestCompareRefusals: hostile or contradictory flags are usage errors that name the flag and
// what it wants, before anything is read.
func TestCompareRefusals(t *testing.T) {
	src := compareSource(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--formats", "int4,fp8"}, exitUsage, `--formats: unknown decode format: "fp8" (want some of int4-g32, int4-g64`},
		{[]string{"--formats", "nvfp4,nvfp4"}, exitUsage, `"nvfp4" given twice`},
		{[]string{"--formats", ""}, exitUsage, "no format"},
		{[]string{"--method", "gptq"}, exitUsage, `--method "gptq": want mse or rtn`},
		{[]string{"--layers", "3-1"}, exitUsage, `--layers "3-1": range "3-1" runs backwards`},
		{[]string{"--layers", "x"}, exitUsage, `"x" is not a layer number`},
		{[]string{"--layers", "-1"}, exitUsage, "not a layer number"},
		{[]string{"--layers", "0"}, exitUsage, "no module to measure"},
		{[]string{"--sample", "-2"}, exitUsage, "--sample -2: want a number of experts per layer"},
		{[]string{"--workers", "-1"}, exitUsage, "--workers -1"},
		{[]string{"--json", "--csv"}, exitUsage, "--json and --csv exclude each other"},
		{[]string{"--plot", filepath.Join(dir, "x.pdf")}, exitUsage, "must end in .png or .svg"},
		{[]string{"--plot", filepath.Join(dir, "nope", "x.svg")}, exitUsage, "cannot write in"},
		{[]string{"--tp", "4"}, exitUsage, "--tp is a serving-plan flag: give --gpu-memory"},
		{[]string{"--gpu-memory", "141"}, exitUsage, `did you mean 141GiB`},
		{[]string{"--gpu-memory", "80GiB", "--serve", "sglang"}, exitUsage, "run pdq plan SRC --serve ENGINE"},
		{[]string{"--gpu-memory", "80GiB", "--tp", "3"}, exitUsage, "--gpus 8 is not a multiple of --tp 3"},
		{[]string{"--decode-dense", "int8"}, exitUsage, "--decode-dense \"int8\": want bf16 or fp8"},
		{[]string{"--targets", "("}, exitUsage, "targets"},
	} {
		_, errOut, code := runMain(t, append([]string{"compare", src}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	if _, errOut, code := runMain(t, "compare", filepath.Join(dir, "missing")); code != exitFailure || !strings.Contains(errOut, "missing") {
		t.Errorf("missing source: exit %d, %q", code, errOut)
	}
}

// TestCompareHelpTeaches: the help names the formats, what the columns mean and examples.
func TestCompareHelpTeaches(t *testing.T) {
	out, _, code := runMain(t, "compare", "--help")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"which decode format for my decode pool", "int4-g128", "nvfp4", "mxfp4", "--sample", "--gpu-memory",
		"pdq compare /models/GLM-5-FP8 --sample 8", "KV cache", "equals what convert --group-size G reports"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// FuzzParseLayers: a layer list parses into at most 65537 layers per range, all non-negative,
// or is refused; never a panic.
func FuzzParseLayers(f *testing.F) {
	for _, s := range []string{"3", "3,10-12", "1-0", "-1", "0-65536", "x", "", ",", "9999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := parseLayers(s)
		if err != nil {
			return
		}
		if len(ls) == 0 || len(ls) > (1<<16+1)*(strings.Count(s, ",")+1) {
			t.Fatalf("%q: %d layers", s, len(ls))
		}
		for l := range ls {
			if l < 0 {
				t.Fatalf("%q: layer %d", s, l)
			}
		}
	})
}
