package main

import (
	"strings"
	"testing"
	"time"
)

// TestShortName: a name cut to fit keeps its layer (and expert) number and its end.
func TestShortName(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"model.layers.17.mlp.experts.123.gate_proj.weight", 60, "model.layers.17.mlp.experts.123.gate_proj.weight"},
		{"model.layers.17.mlp.experts.123.gate_proj.weight", 40, "layers.17.mlp.experts.123.gate_proj"},
		{"model.layers.17.mlp.experts.123.gate_proj.weight", 20, "L17 E123 gate_proj"},
		{"model.layers.17.self_attn.q_a_proj.weight", 20, "L17 …f_attn.q_a_proj"},
		{"model.layers.3.mlp.shared_experts.down_proj.weight_packed", 16, "L3 …ts.down_proj"},
		{"model.embed_tokens.weight", 10, "…ed_tokens"},
	} {
		got := shortName(tc.name, tc.n)
		if got != tc.want || cols(got) > tc.n {
			t.Errorf("shortName(%q, %d) = %q, want %q", tc.name, tc.n, got, tc.want)
		}
	}
}

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
		{90, []string{"convert [cpu]", " 45%", "45.00/100.00 GiB", "ETA ", "L17 E123 gate_proj"}, nil},
		{80, []string{"convert [cpu]", " 45%", "45.00/100.00 GiB", "ETA ", "L17 E123 gate_proj"}, nil},
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
