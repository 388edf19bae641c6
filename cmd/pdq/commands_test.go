package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawFile builds a safetensors file from a header length, header text and data bytes.
func rawFile(t *testing.T, dir, name string, n uint64, header string, data []byte) string {
	t.Helper()
	b := binary.LittleEndian.AppendUint64(nil, n)
	b = append(b, header...)
	b = append(b, data...)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInspectRefusesBadFiles: every malformed input is a clear error (exit status 1) naming the
// file, never a panic.
func TestInspectRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, header string, data []byte) string {
		return rawFile(t, dir, name, uint64(len(header)), header, data)
	}
	ok := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	empty := filepath.Join(dir, "empty.safetensors")
	os.WriteFile(empty, nil, 0o644)
	cases := map[string]string{
		"empty":           empty,
		"huge length":     rawFile(t, dir, "huge.safetensors", 0xFFFFFF000000003C, "{}", nil),
		"length past EOF": rawFile(t, dir, "past.safetensors", 1000, "{}", nil),
		"just brace":      file("brace.safetensors", "{", nil),
		"non-UTF-8":       file("utf.safetensors", "{\"\xff\"", nil),
		"I32 2x2 in 4 B":  file("short.safetensors", `{"a":{"dtype":"I32","shape":[2,2],"data_offsets":[0,4]}}`, make([]byte, 4)),
		"truncated":       file("trunc.safetensors", ok, make([]byte, 4)),
		"trailing bytes":  file("trail.safetensors", ok, make([]byte, 12)),
		"unknown dtype":   file("dtype.safetensors", `{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)),
		"metadata number": file("meta.safetensors", `{"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)),
		"overflow shape":  file("ovf.safetensors", `{"a":{"dtype":"F32","shape":[2,18446744073709551614],"data_offsets":[0,8]}}`, make([]byte, 8)),
		"hole":            file("hole.safetensors", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)),
	}
	for name, path := range cases {
		out, code, err := runPDQ(t, "inspect", path)
		if code != exitFailure || err == nil {
			t.Errorf("%s: exit %d, err %v, output %q", name, code, err, out)
			continue
		}
		if !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
	// A hostile index entry.
	ck := filepath.Join(dir, "hostile")
	os.MkdirAll(ck, 0o755)
	file("x.safetensors", ok, make([]byte, 8))
	os.WriteFile(filepath.Join(ck, "model.safetensors.index.json"), []byte(`{"metadata":{},"weight_map":{"a":"../x.safetensors"}}`), 0o644)
	if _, code, err := runPDQ(t, "inspect", ck); code != exitFailure || err == nil || !strings.Contains(err.Error(), "../x.safetensors") {
		t.Errorf("hostile index: exit %d, err %v", code, err)
	}
}

// TestMainJob runs generate, inspect, plan, convert and verify through the CLI.
func TestMainJob(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src, "--fp8", "--style", "glm4"); code != 0 {
		t.Fatal(err)
	}
	stdout, code, err := runPDQ(t, "inspect", src, "--json")
	if code != 0 {
		t.Fatal(err)
	}
	var ins inspectReport
	if err := json.Unmarshal([]byte(stdout), &ins); err != nil {
		t.Fatal(err)
	}
	if ins.LayoutStr != "FP8 block 128x128" || ins.Roles["routed_experts"].Tensors == 0 || ins.DTypes["F8_E4M3"].Tensors == 0 {
		t.Errorf("inspect: layout %q, roles %v", ins.LayoutStr, ins.Roles)
	}
	stdout, code, err = runPDQ(t, "plan", src, "--json")
	if code != 0 {
		t.Fatal(err)
	}
	var plan map[string]any
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"input_bytes", "prefill_bytes", "decode_bytes", "decode_modules"} {
		if _, ok := plan[k]; !ok {
			t.Errorf("plan --json lacks %q", k)
		}
	}
	if _, code, err = runPDQ(t, "convert", src, "--out", out, "--json"); code != 0 {
		t.Fatal(err)
	}
	var decodeBytes int64
	ents, _ := os.ReadDir(filepath.Join(out, "decode"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".safetensors") {
			fi, _ := e.Info()
			decodeBytes += fi.Size()
		}
	}
	if int64(plan["decode_bytes"].(float64)) != decodeBytes {
		t.Errorf("plan predicted %v decode bytes, convert wrote %d", plan["decode_bytes"], decodeBytes)
	}
	for _, kind := range []string{"decode", "prefill"} {
		if stdout, code, err := runPDQ(t, "verify", src, filepath.Join(out, kind)); code != 0 || !strings.Contains(stdout, "OK") {
			t.Errorf("verify %s: exit %d, %v\n%s", kind, code, err, stdout)
		}
	}
	// The same command again finds its journal and finishes at once; other options are refused.
	if _, code, err := runPDQ(t, "convert", src, "--out", out, "-q"); code != 0 {
		t.Errorf("rerun of a finished conversion: %v", err)
	}
	if _, code, _ := runPDQ(t, "convert", src, "--out", out, "-q", "--group-size", "128"); code != exitFailure {
		t.Errorf("rerun with other options: exit %d, want 1", code)
	}
	// A floor above what INT4 reaches fails the run and names tensors.
	_, code, err = runPDQ(t, "convert", src, "--out", filepath.Join(dir, "out2"), "-q", "--fail-sqnr-below", "40")
	if code != exitFailure || err == nil || !strings.Contains(err.Error(), "weight_packed") {
		t.Errorf("--fail-sqnr-below 40: exit %d, %v", code, err)
	}
}

func TestConvertUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"convert"},
		{"convert", "x"},
		{"convert", "x", "--out", "y", "--device", "tpu"},
		{"plan", "x", "y"},
		{"inspect"},
		{"convert", "x", "--out", "y", "--max-memory", "lots"},
	} {
		if _, code, err := runPDQ(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// TestReviewConvertUsageExitCodes: contradictory or unknown convert flags are bad usage (exit
// status 2), whichever layer notices them, and nothing is written.
func TestConvertUsageExitCodes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--prefill-mode", "symlink"},
		{"--resume", "--force"},
		{"--workers", "-1"},
		{"--readers", "-2"},
	} {
		out := filepath.Join(dir, "out")
		_, code, err := runPDQ(t, append([]string{"convert", src, "--out", out, "-q"}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// TestReviewPlanPerChannelText: pdq plan --group-size 0 describes the decode scheme as per
// channel, not as a group of 0.
func TestPlanPerChannelText(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	stdout, code, err := runPDQ(t, "plan", src, "--group-size", "0")
	if code != 0 {
		t.Fatal(err)
	}
	if strings.Contains(stdout, "INT4 g0") || !strings.Contains(stdout, "INT4 per-channel") {
		t.Errorf("plan --group-size 0 says:\n%s", stdout)
	}
	if strings.Contains(stdout, "cloned") {
		t.Errorf("plan of a BF16 source, whose prefill/ is made, speaks of clones:\n%s", stdout)
	}
}

// TestPlanCloneText: the plan of an FP8 source says where its prefill/ copy costs nothing.
func TestPlanCloneText(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src, "--fp8"); code != 0 {
		t.Fatal(err)
	}
	stdout, code, err := runPDQ(t, "plan", src)
	if code != 0 {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "the FP8 source unchanged") || !strings.Contains(stdout, "prefill/ is cloned: no writes, no space") {
		t.Errorf("plan of an FP8 source says:\n%s", stdout)
	}
}

// TestReviewVerifyParentDir: pdq verify SRC DIR with DIR the convert output (holding prefill/
// and decode/) instead of one of its outputs is bad usage, and the message names the two paths
// that verify takes.
func TestVerifyParentDir(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
	if _, code, err := runPDQ(t, "testdata", "gen", "--out", src); code != 0 {
		t.Fatal(err)
	}
	for _, kind := range []string{"prefill", "decode"} {
		if err := os.MkdirAll(filepath.Join(out, kind), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, code, err := runPDQ(t, "verify", src, out)
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), filepath.Join(out, "decode")) {
		t.Errorf("verify of the parent directory: exit %d, err %v", code, err)
	}
}
