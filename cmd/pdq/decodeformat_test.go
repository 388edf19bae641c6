package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertDecodeFormats runs pdq convert --decode-format through the CLI: NVFP4 and MXFP4
// outputs that pdq verify accepts, --fail-sqnr-below applying to their tensors, a --group-size
// that contradicts a fixed-group format or an unknown format refused as bad usage, and W4AFP8's
// shape refusal with its hint.
func TestConvertDecodeFormats(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--decode-format", "nvfp4"}, {"--decode-format", "mxfp4", "--group-size", "32", "--method", "rtn"}} {
		out := filepath.Join(dir, args[1])
		if _, code, err := runPDQ(t, append([]string{"convert", src, "--out", out, "-q", "--only", "decode"}, args...)...); code != 0 {
			t.Fatalf("%v: %v", args, err)
		}
		stdout, code, err := runPDQ(t, "verify", src, filepath.Join(out, "decode"))
		if code != 0 || !strings.Contains(stdout, "OK") || !strings.Contains(stdout, args[1]) {
			t.Errorf("verify %s: exit %d, %v\n%s", args[1], code, err, stdout)
		}
		b, _ := os.ReadFile(filepath.Join(out, "decode", "config.json"))
		if !strings.Contains(string(b), args[1]+"-pack-quantized") {
			t.Errorf("%s: config.json names no %s-pack-quantized group", args[1], args[1])
		}
	}
	_, code, err := runPDQ(t, "convert", src, "--out", filepath.Join(dir, "floor"), "-q", "--decode-format", "nvfp4", "--fail-sqnr-below", "40")
	if code != exitFailure || err == nil || !strings.Contains(err.Error(), "weight_packed") {
		t.Errorf("nvfp4 --fail-sqnr-below 40: exit %d, %v", code, err)
	}
	for _, args := range [][]string{
		{"--decode-format", "nvfp4", "--group-size", "32"},
		{"--decode-format", "w4afp8", "--group-size", "64"},
		{"--decode-format", "fp6"},
	} {
		out := filepath.Join(dir, "bad")
		_, code, err := runPDQ(t, append([]string{"convert", src, "--out", out, "-q"}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", args, out)
		}
	}
	_, code, err = runPDQ(t, "convert", src, "--out", filepath.Join(dir, "w4"), "-q", "--decode-format", "w4afp8")
	if code != exitFailure || err == nil || !strings.Contains(err.Error(), "divisible by 256") || !strings.Contains(hintFor(err), "--decode-format") {
		t.Errorf("w4afp8 on experts of intermediate size 128: exit %d, %v, hint %q", code, err, hintFor(err))
	}
}
