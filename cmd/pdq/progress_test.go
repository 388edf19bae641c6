package main

import (
	"strings"
	"testing"
	"time"
)

// TestProgressLineFits: the line fits every width, keeps the most useful fields when narrow and
// shows the whole tensor name when wide.
func TestProgressLineFits(t *testing.T) {
	name := "model.layers.17.mlp.experts.123.gate_proj.weight"
	for _, tc := range []struct {
		width          int
		want, wantNone []string
	}{
		{200, []string{"convert [cpu]", " 45%", "45.00/100.00 GiB", "GiB/s", "ETA ", name}, []string{"…"}},
		{120, []string{"convert [cpu]", " 45%", "45.00/100.00 GiB", "ETA ", name}, []string{"…"}},
		{90, []string{"convert [cpu]", " 45%", "45.00/100.00 GiB", "ETA ", "…", "gate_proj.weight"}, nil},
		{80, []string{"convert [cpu]", " 45%", "45.00/100.00 GiB", "ETA "}, nil},
		{60, []string{"convert", " 45%", "ETA "}, nil},
		{40, []string{" 45%"}, nil},
		{20, nil, nil},
	} {
		line := progressLine(tc.width, "convert [cpu]", 45<<30, 100<<30, 30*time.Second, name)
		if cols(line) >= tc.width {
			t.Errorf("width %d: %d columns: %q", tc.width, cols(line), line)
		}
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("width %d: no %q in %q", tc.width, w, line)
			}
		}
		for _, w := range tc.wantNone {
			if strings.Contains(line, w) {
				t.Errorf("width %d: %q in %q", tc.width, w, line)
			}
		}
		if b := strings.Index(line, "["); tc.width >= 40 && (b < 0 || !strings.Contains(line[b:], "]")) {
			t.Errorf("width %d: no bar in %q", tc.width, line)
		}
	}
	// A narrow terminal keeps a bar of at least 10 columns rather than shrinking it to "[]".
	line := progressLine(80, "convert [cpu]", 45<<30, 100<<30, 30*time.Second, name)
	i := strings.LastIndex(line, "[")
	if j := i + strings.Index(line[i:], "]"); j-i-1 < 10 {
		t.Errorf("80 columns: bar of %d columns in %q", j-i-1, line)
	}
}

// TestProgressBarStopsWhereItWas: Stop draws the state as it is, not 100%, and ends the line.
func TestProgressBarStopsWhereItWas(t *testing.T) {
	var buf strings.Builder
	b := startProgressBar(&buf, func() int { return 80 }, "convert [cpu]")
	b.Update(30, 100, "x")
	b.Stop()
	out := buf.String()
	if !strings.HasSuffix(out, "\n") || !strings.Contains(out, " 30%") || strings.Contains(out, "100%") {
		t.Errorf("after Stop: %q", out)
	}
	if line := progressLine(80, "convert", 100, 100, 3*time.Second, ""); !strings.Contains(line, "in 3s") || strings.Contains(line, "ETA") {
		t.Errorf("finished: %q", line)
	}
	b.Stop() // a second Stop draws nothing more
	if buf.String() != out {
		t.Errorf("second Stop wrote %q", buf.String()[len(out):])
	}
}
